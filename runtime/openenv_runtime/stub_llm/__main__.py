"""``python -m openenv_runtime.stub_llm``: the same as ``python -m openenv_runtime.testing.stub_llm``."""

from ..testing.stub_llm.__main__ import main

if __name__ == "__main__":
    main()
