"""What a running environment or trainer tells an operator: OpenTelemetry spans (``tracing``)."""
