"""The error a bad request body raises on the trainer's routes (answered 400, or the status it
names, with an OpenAI-shaped body); its own module so that every parser can raise it."""

from __future__ import annotations

from typing import Any, Optional


class RequestError(Exception):
    def __init__(self, message: str, param: Optional[str] = None, status: int = 400):
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


def error_body(message: str, kind: str = "invalid_request_error", param: Optional[str] = None, code: Any = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
