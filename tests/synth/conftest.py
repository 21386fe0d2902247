from __future__ import annotations

from tests.swe_fixtures import _private_cache, docker_image

__all__ = ["_private_cache", "docker_image"]
