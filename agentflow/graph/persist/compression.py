"""zstd with bounded output: a run folder's checkpoint blobs and diffs are read without trusting the sizes
they declare (`ZstdDecompressor.decompress` allocates a frame's stated size up front); `decompress` streams
the frame and stops past `limit`.
"""

from __future__ import annotations

import zstandard

from agentflow.errors import UserError

MAX_DECOMPRESSED = 256 << 20
"""Bytes one stored value (a checkpoint blob, a workspace diff) may decompress to."""
_CHUNK = 1 << 20


def decompress(data: bytes, what: str, *, limit: int = MAX_DECOMPRESSED,
               dctx: zstandard.ZstdDecompressor | None = None) -> bytes:
    """The first zstd frame of `data`, decompressed; one over `limit` bytes, or not zstd, is a UserError."""
    hint = "the run folder is damaged or not one agentflow wrote; use another run"
    too_big = UserError(f"{what} decompresses to more than {limit >> 20} MiB: refused", hint=hint)
    try:
        declared = zstandard.get_frame_parameters(data).content_size
        if declared != zstandard.CONTENTSIZE_UNKNOWN and declared > limit:
            raise too_big
        chunks, total = [], 0
        with (dctx or zstandard.ZstdDecompressor()).stream_reader(data) as reader:
            while chunk := reader.read(_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise too_big
                chunks.append(chunk)
    except zstandard.ZstdError as exc:
        raise UserError(f"{what} is not readable zstd data ({exc})", hint=hint) from None
    return b"".join(chunks)
