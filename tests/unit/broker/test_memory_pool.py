"""MemoryPool: the `queued.max.request.bytes` accounting (pure logic)."""

from __future__ import annotations

from broker.memory_pool import MemoryPool


def test_first_reservation_may_exceed_capacity_later_ones_must_fit() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(150)  # a single request of socket.request.max.bytes always fits
    assert not pool.try_allocate(1)
    pool.release(150)
    assert pool.try_allocate(60)
    assert pool.try_allocate(40)
    assert not pool.try_allocate(1)
    assert pool.reserved == 100


def test_unbounded_pool_grants_everything() -> None:
    for capacity in (-1, 0):
        pool = MemoryPool(capacity)
        assert all(pool.try_allocate(10**9) for _ in range(5))


def test_release_wakes_waiters_in_order_until_one_does_not_fit() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(100)
    woken: list[str] = []

    def waiter(name: str, size: int):  # type: ignore[no-untyped-def]
        def retry() -> bool:
            if pool.try_allocate(size):
                woken.append(name)
                return True
            return False

        return retry

    pool.wait(1, waiter("a", 60))
    pool.wait(2, waiter("b", 60))
    pool.wait(3, waiter("c", 10))
    pool.release(100)
    # a fits; b does not, and c waits behind b (no starvation of the big one)
    assert woken == ["a"] and pool.waiting == 2
    pool.forget(2)
    pool.release(60)
    assert woken == ["a", "c"] and pool.waiting == 0
