"""The S3 server the store tests run against keeps S3's promise that a conditional put is atomic.

moto checks `If-None-Match: *` and then stores the object as two separate steps, so on a loaded machine two
concurrent creates of one object could both pass the check and the second silently replaced the first: two
writers of one key got the same handle for different bytes (`test_concurrent_writers_of_one_key_never_lose_a_payload`
failed with `assert 23 == 24`). Real S3, GCS and Azure check and store in one step; `conftest.py` makes moto do the
same. This test widens moto's window between the check and the store to prove it.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from moto.s3.models import S3Backend

from .conftest import S3Server, StoreKit

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize('kit', ['object-s3'], indirect=True)
async def test_concurrent_creates_of_one_object_never_both_succeed(
    kit: StoreKit, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = kit.make()
    store_object = S3Backend.put_object

    def slow_store(self: S3Backend, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        if '/~p/' in key_name:
            time.sleep(0.05)  # Between moto's `If-None-Match` check and the store: every racing create is inside.
        return store_object(self, bucket_name, key_name, *args, **kwargs)

    monkeypatch.setattr(S3Backend, 'put_object', slow_store)
    payloads = [f'writer {n}\n'.encode() * (1 + n % 5) for n in range(12)]
    handles: list[str] = [''] * len(payloads)

    async def write(position: int) -> None:
        handles[position] = await store.write('run/call_0/0', payloads[position])

    async with anyio.create_task_group() as group:
        for position in range(len(payloads)):
            group.start_soon(write, position)
    assert len(set(handles)) == len(payloads)
    assert [await store.read(handle) for handle in handles] == payloads
