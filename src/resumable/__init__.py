"""resumable: durable execution for LLM-written Python."""

from resumable.errors import ResumableError

__all__ = ["ResumableError"]
__version__ = "0.1.0"
