"""One process of the shared-limit tests: ``n`` requests to a loopback URL, each after ``acquire()``;
or, with URL ``try``, ``n`` immediate ``try_acquire()`` after a "go" line on stdin, printing how many
were admitted and the clock before and after.

python -m tests.cluster.rate_client URL N REQUESTS_PER_MINUTE
"""

import asyncio
import sys
import time

import httpx

from giant_assets.runs.ratelimit import SharedRateLimiter, make_rate_limiter


async def main(url: str, n: int, requests_per_minute: float) -> None:
    limiter = make_rate_limiter("openai", "scripted-limit", "LIMIT_TEST_KEY", requests_per_minute)
    assert isinstance(limiter, SharedRateLimiter), type(limiter)
    if url == "try":
        await limiter.try_acquire()  # connected; this first admission is counted too
        print("ready", flush=True)
        sys.stdin.readline()
        before = time.time()
        admitted = 1 + sum([await limiter.try_acquire() for _ in range(n - 1)])
        print(admitted, before, time.time(), flush=True)
        return
    async with httpx.AsyncClient(timeout=10) as client:

        async def one() -> None:
            await limiter.acquire()
            reply = await client.post(
                url, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            )
            reply.raise_for_status()
            await limiter.record_tokens(reply.json()["usage"]["total_tokens"])

        await asyncio.gather(*(one() for _ in range(n)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
