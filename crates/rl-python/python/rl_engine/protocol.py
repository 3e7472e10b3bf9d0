"""The current Tinker SDK's wire formats, translated to and from skyrl-tx 0.3.0's JSON.

skyrl-tx 0.3.0 speaks the protocol of tinker 0.16: JSON bodies both ways. From 0.18 on the SDK
sends `forward_backward` as the public protobuf `ForwardBackwardRequest` (zstd-compressed when the
server's client config asks for it; `forward` is the same message with `forward_only`), and from
about 0.25 it accepts a `ForwardBackwardOutput` or `SampleResponse` result only as protobuf. These
pure functions do the translation with the SDK's own generated message classes
(`tinker.proto.tinker_public_pb2`), so a field the SDK adds is a decode error here, not silently
lost; `routes.py` applies them to the engine's HTTP traffic.

What skyrl-tx cannot do is refused with `Unsupported` (answered 400 with the reason): image and
audio chunks, sparse tensors, string loss-function settings.
"""

from __future__ import annotations

import json
from typing import Any

# A forward_backward body larger than this once decompressed is refused: zstd frames can claim
# any size, and the engine holds the whole body in memory.
MAX_BODY_BYTES = 512 * 1024 * 1024


class Unsupported(ValueError):
    """A request the local engine cannot serve; the message says what and why."""


def _pb():
    from tinker.proto import tinker_public_pb2  # ships inside the tinker SDK wheel

    return tinker_public_pb2


def decompress(body: bytes, encoding: str) -> bytes:
    """The body as sent before its Content-Encoding (`zstd` or none), within MAX_BODY_BYTES."""
    if encoding in ("", "identity"):
        return body
    if encoding != "zstd":
        raise Unsupported(f"Content-Encoding {encoding!r} is not supported (only zstd)")
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(body)
    out = reader.read(MAX_BODY_BYTES + 1)
    if len(out) > MAX_BODY_BYTES:
        raise Unsupported(f"the decompressed body is larger than {MAX_BODY_BYTES} bytes")
    return out


def _dense(tensor, what: str) -> list:
    import numpy as np

    pb = _pb()
    dtypes = {pb.DTYPE_FLOAT32: np.float32, pb.DTYPE_INT64: np.int64, pb.DTYPE_INT32: np.int32}
    if tensor.HasField("sparse_csr"):
        raise Unsupported(f"{what}: sparse tensors are not supported by the local engine")
    dtype = dtypes.get(tensor.dtype)
    if dtype is None:
        raise Unsupported(f"{what}: tensor dtype {tensor.dtype} is not supported by the local engine")
    return np.frombuffer(tensor.dense, dtype=dtype).tolist()


def forward_backward_from_proto(body: bytes) -> tuple[str, bytes]:
    """A protobuf `ForwardBackwardRequest` as skyrl-tx's JSON request: the route to send it to
    (`/api/v1/forward` when `forward_only`) and the body."""
    import numpy as np

    message = _pb().ForwardBackwardRequest()
    try:
        message.ParseFromString(body)
    except Exception as error:  # protobuf's DecodeError
        raise Unsupported(f"the body is not a ForwardBackwardRequest: {error}") from None
    data = []
    for index, datum in enumerate(message.data):
        chunks = []
        for chunk in datum.model_input:
            kind = chunk.WhichOneof("chunk")
            if kind != "encoded_text":
                raise Unsupported(f"datum {index}: {kind} chunks are not supported by the local engine")
            chunks.append({"tokens": np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist()})
        inputs = {name: {"data": _dense(tensor, f"datum {index} {name}")} for name, tensor in datum.loss_fn_inputs.items()}
        data.append({"model_input": {"chunks": chunks}, "loss_fn_inputs": inputs})
    config: dict[str, float] = {name: float(value) for name, value in message.loss_fn_config.items()}
    for name, value in message.loss_fn_config_v2.items():
        if value.WhichOneof("value") == "text":
            raise Unsupported(f"loss_fn_config {name!r}: text values are not supported by the local engine")
        config[name] = float(value.number)
    request: dict[str, Any] = {"data": data, "loss_fn": message.loss_fn, "loss_fn_config": config or None}
    if message.forward_only:
        return "/api/v1/forward", json.dumps({"model_id": message.model_id, "forward_input": request}).encode()
    return "/api/v1/forward_backward", json.dumps({"model_id": message.model_id, "forward_backward_input": request}).encode()


def _forward_backward_output(result: dict) -> bytes:
    import numpy as np

    pb = _pb()
    message = pb.ForwardBackwardOutput(loss_fn_output_type=result.get("loss_fn_output_type") or "ArrayRecord")
    for name, value in (result.get("metrics") or {}).items():
        message.metrics[name] = float(value)
    outputs = result.get("loss_fn_outputs") or []
    if outputs:
        record = message.loss_fn_outputs.add()
        record.num_datums = len(outputs)
        for name in outputs[0]:
            integer = outputs[0][name].get("dtype") == "int64"
            arrays = [np.asarray(output[name]["data"], dtype=np.int64 if integer else np.float32) for output in outputs]
            offsets = np.cumsum([0] + [array.nbytes for array in arrays]).astype(np.int64)
            field = record.fields[name]
            field.dtype = pb.DTYPE_INT64 if integer else pb.DTYPE_FLOAT32
            field.data = b"".join(array.tobytes() for array in arrays)
            field.offsets = offsets.tobytes()
    return message.SerializeToString()


def _sample_response(result: dict) -> bytes:
    import numpy as np

    pb = _pb()
    reasons = {"stop": pb.STOP_REASON_STOP, "length": pb.STOP_REASON_LENGTH}
    message = pb.SampleResponse()
    for sequence in result["sequences"]:
        out = message.sequences.add()
        reason = sequence.get("stop_reason")
        if reason not in reasons:
            raise Unsupported(f"stop_reason {reason!r} has no protobuf value")
        out.stop_reason = reasons[reason]
        out.tokens = np.asarray(sequence["tokens"], dtype=np.int32).tobytes()
        if sequence.get("logprobs"):
            out.logprobs = np.asarray(sequence["logprobs"], dtype=np.float32).tobytes()
    prompt = result.get("prompt_logprobs")
    if prompt:
        # The proto's convention for a position without a logprob (the first token) is NaN.
        message.prompt_logprobs = np.asarray([np.nan if x is None else x for x in prompt], dtype=np.float32).tobytes()
    return message.SerializeToString()


def result_to_proto(result: Any) -> bytes | None:
    """A completed future's JSON result as the protobuf the SDK asks for, or None when the SDK
    takes this kind of result as JSON (saves, optim_step, ...)."""
    if not isinstance(result, dict):
        return None
    if "loss_fn_outputs" in result:
        return _forward_backward_output(result)
    if "sequences" in result:
        return _sample_response(result)
    return None


def with_sequence_ids(future: Any, samples: int) -> Any:
    """An `/asample` future with the one id per sample the SDK stamps its sequences with."""
    if isinstance(future, dict) and "sample_sequence_ids" not in future and "request_id" in future:
        future = dict(future, sample_sequence_ids=[f"seq-{future['request_id']}-{i}" for i in range(samples)])
    return future
