"""The HTTP routes: sessions over plain requests, the Task API and the API docs pages."""
