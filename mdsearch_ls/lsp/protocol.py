"""The JSON-RPC layer under the handlers: every request gets an answer, whatever it carries.

pygls 2.1 turns each message into lsprotocol types inside ``json.loads``' object hook. When the
params do not fit (``null``, ``[]``, a string where a line number goes) it logs "Unable to
deserialize message" and drops the message, so the client's request waits forever. It also
answers requests before ``initialize``, drops everything after ``shutdown`` without a word, and
puts a Python traceback (with this machine's paths) in ``error.data`` of an internal error.

:class:`MdSearchProtocol` keeps the object hook from structuring anything and does the
structuring itself in :meth:`~MdSearchProtocol.handle_message`, where it knows the message's id
and method. That is where the lifecycle and the params are checked, one place for every
request, so no handler has to defend against a message pygls could not read:

* params that do not fit the method's lsprotocol type: -32602 InvalidParams, naming the field
  ("textDocument/hover: params.position.line: expected a non-negative integer, got 'x'");
* a request before ``initialize`` has been answered: -32002 ServerNotInitialized; a
  notification then is dropped, except ``exit`` (LSP 3.17, "Server lifecycle");
* a request after ``shutdown``: -32600 InvalidRequest; ``exit`` still exits;
* an exception inside a handler: -32603 with the exception's one-line text; the traceback goes
  to the log (stderr), never to the client;
* a message that is not a JSON-RPC 2.0 request, notification or response: -32600 (id ``null``
  when it has no usable id), and a body that is not JSON: -32700 with id ``null``;
* a malformed notification: one log line, no answer (there is nobody to answer).

Unknown methods still answer -32601 MethodNotFound and unknown ``$/`` notifications are ignored,
as pygls does.
"""

from __future__ import annotations

import json
import logging
import typing
from concurrent.futures import Future
from typing import Any

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcRequestCancelled,
)
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    MsgId,
)
from pygls.protocol.language_server import LanguageServerProtocol

from mdsearch_ls.engine.api import lone_surrogate_field
from mdsearch_ls.lsp.params import (
    NONE_TYPE,
    describe_params_error,
    exception_text,
    got,
    one_line,
)

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002

class _Rejected(Exception):
    """A message refused before dispatch: answered with ``code`` when it has an id."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _valid_id(value: Any) -> bool:
    """LSP ids are integers or strings (JSON-RPC's ``null`` id is for errors only)."""
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


# ---- the protocol -----------------------------------------------------------------------------


class MdSearchProtocol(LanguageServerProtocol):
    """pygls' LSP protocol, checked at the door: see the module docstring for the rules."""

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        # cattrs' default for a ``str`` field is ``str(value)``: a null query became the text
        # "None" and was searched. A string field takes a string or the request is invalid.
        converter.register_structure_hook(str, _strict_str)
        self._init_state = "new"  # "new" -> "pending" (initialize running) -> "done"
        self._initialize_id: MsgId | None = None
        self._shutdown_requested = False
        self.exit_code = 0
        """What the process exits with: 1 after an ``exit`` that no ``shutdown`` preceded."""
        self._methods: dict[MsgId, str] = {}  # in-flight request id -> method, for the log

    # -- reading ---------------------------------------------------------------------------

    def structure_message(self, data: dict[str, Any]) -> Any:
        """The ``json.loads`` object hook: keep every object raw.

        pygls structures here, where a failure has no id to answer and a nested object that
        happens to carry a "jsonrpc" key is mistaken for a message; :meth:`handle_message`
        structures the whole message instead.
        """
        return data

    def handle_message(self, message: Any) -> None:  # type: ignore[override]
        """Check one decoded message and hand it to pygls, or answer it here."""
        msg_id: MsgId | None = None
        answerable = False
        try:
            if not isinstance(message, dict):
                kind = "an array (batch)" if isinstance(message, list) else got(message)
                answerable = True  # with id null: the sender cannot match it, but sees it
                raise _Rejected(
                    INVALID_REQUEST,
                    f"a message must be a JSON-RPC object, got {kind}; batches are not supported",
                )
            has_id = "id" in message
            if has_id and _valid_id(message["id"]):
                msg_id = message["id"]
            if "method" not in message and has_id and ("result" in message or "error" in message):
                if message.get("jsonrpc") != self.VERSION:
                    raise _Rejected(INVALID_REQUEST, 'a response without "jsonrpc": "2.0"')
                self._receive_response(message)
                return
            answerable = has_id
            if message.get("jsonrpc") != self.VERSION:
                raise _Rejected(INVALID_REQUEST, 'a message must have "jsonrpc": "2.0"')
            if "method" not in message:
                raise _Rejected(
                    INVALID_REQUEST, "a message must have a method (or be a response)"
                )
            method = message["method"]
            if not isinstance(method, str):
                raise _Rejected(INVALID_REQUEST,
                                    f"method: expected a string, got {got(method)}")
            if has_id and msg_id is None:
                raise _Rejected(
                    INVALID_REQUEST,
                    f"{method}: id: expected an integer or a string, got {got(message['id'])}",
                )
            if has_id:
                self._receive_request(msg_id, method, message)
            else:
                answerable = False
                self._receive_notification(method, message)
        except _Rejected as err:
            if answerable:
                log.info("rejected message (id %s): %s", msg_id, err.message)
                self.send_error(msg_id, err.code, err.message)
            else:
                log.warning("ignored message: %s", err.message)
        except Exception as exc:
            # A bug of ours before the handler ran: still an answer, and the traceback in the log.
            log.error("could not handle message %s", one_line(repr(message), 200), exc_info=exc)
            if answerable:
                self.send_error(msg_id, INTERNAL_ERROR, exception_text(exc))

    def _receive_request(self, msg_id: MsgId, method: str, message: dict[str, Any]) -> None:
        if method == types.INITIALIZE:
            if self._init_state != "new":
                raise _Rejected(INVALID_REQUEST, "initialize may only be sent once")
        elif self._init_state != "done":
            raise _Rejected(
                SERVER_NOT_INITIALIZED,
                f"{method}: the server is not initialized; send 'initialize' first",
            )
        if self._shutdown_requested:
            raise _Rejected(
                INVALID_REQUEST, f"{method}: the server is shutting down; only 'exit' is accepted"
            )
        field = lone_surrogate_field(message.get("params"), "params")
        if field is not None:
            raise _Rejected(INVALID_PARAMS, f"{method}: {field} holds a lone surrogate (half of "
                                            f"a UTF-16 pair, such as an emoji cut in two); send "
                                            f"whole characters")
        if self._is_known(method):
            message_type = self.get_message_type(method)
            if _is_notification_type(message_type):
                raise _Rejected(
                    INVALID_REQUEST, f"{method} is a notification: send it without an id"
                )
            structured = self._structure(method, message, JsonRPCRequestMessage)
            if structured is None:
                return
        else:
            # pygls answers MethodNotFound; the params of a method nobody handles do not matter.
            structured = JsonRPCRequestMessage(
                id=msg_id, method=method, jsonrpc=self.VERSION, params=message.get("params")
            )
        if method == types.INITIALIZE:
            self._init_state = "pending"
            self._initialize_id = msg_id
        elif method == types.SHUTDOWN:
            # From here on only exit counts, even while the shutdown handler still runs.
            self._shutdown_requested = True
        self._methods[msg_id] = method
        super().handle_message(structured)

    def _receive_notification(self, method: str, message: dict[str, Any]) -> None:
        if method == types.EXIT:
            # Whatever its params, exit exits: with 0 after shutdown, else 1 (LSP 3.17). At
            # once: pygls would wait for its thread pool, i.e. for any request still running.
            self.exit_code = 0 if self._shutdown_requested else 1
            self._server.exit_now(self.exit_code)  # type: ignore[attr-defined]
            return
        if self._init_state != "done" or self._shutdown_requested:
            when = "after shutdown" if self._shutdown_requested else "before initialize"
            log.info("dropped notification %s %s", method, when)
            return
        structured = self._structure(method, message, JsonRPCNotification)
        if structured is not None:
            super().handle_message(structured)

    def _is_known(self, method: str) -> bool:
        return method in self.fm.builtin_features or method in self.fm.features

    def _structure(self, method: str, message: dict[str, Any], fallback: type) -> Any | None:
        """The message as its lsprotocol type; None (after answering or logging) if it does
        not fit."""
        message_type = self.get_message_type(method) or fallback
        data = message
        if _params_are_void(message_type):
            # shutdown/exit take no params; some clients send {} or [] anyway.
            data = {k: v for k, v in message.items() if k != "params"}
        elif message_type is fallback and "params" not in message:
            # JSON-RPC params are optional; pygls' generic message types still want the key.
            data = {**message, "params": None}
        try:
            return self._converter.structure(data, message_type)
        except Exception as exc:
            text = describe_params_error(method, exc, data, message_type)
            if "id" in message:
                log.info("rejected request %s (id %s): %s", method, message["id"], text)
                self.send_error(message["id"], INVALID_PARAMS, text)
            else:
                log.warning("ignored notification: %s", text)
            return None

    def _receive_response(self, message: dict[str, Any]) -> None:
        """A client's answer to one of our requests; a malformed one fails that request at
        once instead of leaving it waiting."""
        msg_id = message["id"]
        if "error" in message:
            self._result_types.pop(msg_id, None)
            response_type: Any = types.ResponseErrorMessage
        else:
            response_type = self._result_types.pop(msg_id, None) or JsonRPCResponseMessage
        try:
            structured = self._converter.structure(message, response_type)
        except Exception as exc:
            text = describe_params_error("response", exc, message, response_type)
            log.warning("malformed response from the client (id %s): %s", msg_id, text)
            self._handle_response(
                msg_id, None, types.ResponseError(code=INVALID_PARAMS, message=text)
            )
            return
        super().handle_message(structured)

    # -- answering -------------------------------------------------------------------------

    def send_error(self, msg_id: MsgId | None, code: int, message: str) -> None:
        if msg_id is None:
            # lsprotocol leaves a None id out; JSON-RPC wants "id": null.
            self._send_data({"jsonrpc": self.VERSION, "id": None,
                             "error": {"code": code, "message": one_line(message)}})
        else:
            self._send_response(msg_id, error=types.ResponseError(code=code,
                                                                  message=one_line(message)))

    def _send_handler_result(self, future: Future[Any], *, msg_id: MsgId) -> None:
        """A handler finished: its result, or its error without a traceback.

        An error a handler raises on purpose (InvalidParams and friends) is an answer, worth one
        log line; anything else is our bug: -32603 with its one-line text, traceback to the log.
        """
        self._request_futures.pop(msg_id, None)
        method = self._methods.get(msg_id, "request")
        if future.cancelled():
            self.send_error(msg_id, JsonRpcRequestCancelled.CODE,
                             f'Request with id "{msg_id}" is canceled')
            return
        exc = future.exception()
        if exc is None:
            self._send_response(msg_id, result=future.result())
        elif isinstance(exc, JsonRpcException) and not isinstance(exc, JsonRpcInternalError):
            log.info("%s (id %s) answered with error %s: %s", method, msg_id, exc.code,
                     one_line(exc.message))
            self._send_response(msg_id, error=exc.to_response_error())
        else:
            log.error("%s (id %s) failed", method, msg_id, exc_info=exc)
            self.send_error(msg_id, INTERNAL_ERROR, f"{method} failed: {exception_text(exc)}")

    def _check_handler_result(self, future: Future[Any]) -> None:
        """A notification handler failed: the traceback to the log, once."""
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            log.error("notification handler failed: %s", exception_text(exc), exc_info=exc)

    def _send_response(
        self,
        msg_id: MsgId,
        result: Any | None = None,
        error: types.ResponseError | None = None,
    ) -> None:
        """Every response passes here: no traceback leaves (pygls puts one in an error's
        ``data``, and none of ours carries data), and initialize's answer opens the door."""
        self._methods.pop(msg_id, None)
        if error is not None:
            error = types.ResponseError(code=error.code, message=one_line(error.message))
        if self._init_state == "pending" and msg_id == self._initialize_id:
            self._init_state = "done" if error is None else "new"
        super()._send_response(msg_id, result, error)

    def _send_data(self, data: Any) -> None:
        """pygls' ``_send_data`` for our one transport (stdio, written synchronously), except
        that a result that cannot be encoded becomes a -32603 answer instead of a log line and
        a request that never returns."""
        try:
            body = json.dumps(data, default=self._serialize_message)
        except Exception as exc:
            msg_id = getattr(data, "id", None)
            log.error("could not encode a message (id %s)", msg_id, exc_info=exc)
            if msg_id is None or not (hasattr(data, "result") or hasattr(data, "error")):
                return
            body = json.dumps({
                "jsonrpc": self.VERSION, "id": msg_id,
                "error": {"code": INTERNAL_ERROR,
                          "message": f"could not encode the answer: {exception_text(exc)}"},
            })
        # json.dumps writes ASCII only: its length in characters is its length in bytes.
        frame = f"Content-Length: {len(body)}\r\n\r\n{body}"
        self.writer.write(frame.encode("ascii"))  # type: ignore[union-attr]


def _strict_str(value: Any, _type: Any) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {got(value)}")


def _is_notification_type(message_type: Any) -> bool:
    return (isinstance(message_type, type) and attrs.has(message_type)
            and "id" not in attrs.fields_dict(message_type))


def _params_are_void(message_type: Any) -> bool:
    if not (isinstance(message_type, type) and attrs.has(message_type)):
        return False
    params = attrs.fields_dict(message_type).get("params")
    if params is None:
        return False
    args = typing.get_args(params.type)
    return params.type is NONE_TYPE or (bool(args) and all(a is NONE_TYPE for a in args))


__all__ = ["MdSearchProtocol"]
