"""The page flow: fair slots between jobs, the render-ahead budget, and the room to admit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ocrq.consumer.flow import FairSlots, PageFlow, Rendered, RenderSlots


async def settle() -> None:
    """Let every task that can run do so."""
    for _ in range(20):
        await asyncio.sleep(0)


def waiter(slots: FairSlots, owner: str, log: list[str]) -> asyncio.Task[None]:
    async def take() -> None:
        await slots.acquire(owner)
        log.append(owner)

    return asyncio.create_task(take())


async def test_a_job_arriving_behind_a_big_one_gets_the_next_free_slot() -> None:
    slots, granted = FairSlots(1), list[str]()
    await slots.acquire("big")
    tasks = [waiter(slots, "big", granted) for _ in range(5)]
    await settle()
    tasks.append(waiter(slots, "small", granted))
    await settle()
    slots.release("big")
    await settle()
    assert granted == ["small"]
    for _ in range(5):
        slots.release(granted[-1])
        await settle()
    assert granted == ["small", "big", "big", "big", "big", "big"]
    await asyncio.gather(*tasks)


async def test_free_slots_go_round_robin_between_jobs_holding_as_many() -> None:
    slots, granted = FairSlots(1), list[str]()
    await slots.acquire("x")
    tasks = [waiter(slots, owner, granted) for owner in ("a", "a", "a", "b", "b", "b")]
    await settle()
    for _ in range(6):
        slots.release(granted[-1] if granted else "x")
        await settle()
    assert granted == ["a", "b", "a", "b", "a", "b"]
    await asyncio.gather(*tasks)


async def test_a_cancelled_wait_takes_no_slot() -> None:
    slots, granted = FairSlots(1), list[str]()
    await slots.acquire("a")
    gone, stays = waiter(slots, "gone", granted), waiter(slots, "stays", granted)
    await settle()
    gone.cancel()
    await settle()
    slots.release("a")
    await stays
    assert granted == ["stays"] and slots.used == 1 and dict(slots.held) == {"stays": 1}


async def test_a_wait_cancelled_just_as_it_was_granted_gives_the_slot_back() -> None:
    slots, granted = FairSlots(1), list[str]()
    await slots.acquire("a")
    late = waiter(slots, "late", granted)
    await settle()
    slots.release("a")  # granted to "late", which has not run yet...
    late.cancel()  # ...and is cancelled before it does
    await settle()
    assert granted == [] and slots.used == 0


async def test_rendering_stops_while_rendered_pages_fill_the_budget() -> None:
    render, granted = RenderSlots(2, budget_bytes=1000), list[str]()
    render.group_bytes = 100
    render.add_ready(950)
    task = waiter(render, "job", granted)
    await settle()
    assert granted == []  # 950 ready + 100 more would not fit
    render.take_ready(950)  # the engine took them
    await task
    assert granted == ["job"]


async def test_a_page_group_larger_than_the_whole_budget_still_renders_alone() -> None:
    render = RenderSlots(2, budget_bytes=10)
    render.group_bytes = 1_000_000
    await asyncio.wait_for(render.acquire("job"), 5)
    assert not render.has_room()  # but not two of them


def room_after(flow: PageFlow, *steps: Callable[[PageFlow], None]) -> int:
    for step in steps:
        step(flow)
    return flow.room()


async def test_a_worker_takes_jobs_only_while_few_page_groups_wait_to_be_rendered() -> None:
    flow = PageFlow(slots=32, renderers=2, budget_bytes=10**9)
    assert flow.room() == 4  # two per rendering process
    assert room_after(flow, lambda f: f.admit("a")) == 3  # not inspected yet: one page group
    assert room_after(flow, lambda f: f.plan("a", 10)) == 0  # a 10-page PDF
    assert room_after(flow, lambda f: f.forget("a")) == 4  # done, failed or cancelled


async def test_a_rendered_page_group_makes_room_and_waits_in_the_budget_until_sent() -> None:
    flow = PageFlow(slots=1, renderers=1, budget_bytes=10**9)
    flow.admit("a")
    flow.plan("a", 1)
    async with flow.render_turn("a") as rendered:
        rendered.size = 5000
    assert flow.ready == 1 and flow.render.ready_bytes == 5000
    async with flow.engine_turn("a", rendered):
        assert flow.ready == 0 and flow.render.ready_bytes == 0 and flow.engine.used == 1
    assert flow.engine.used == 0


async def test_a_worker_holding_two_engine_fulls_takes_no_more_jobs() -> None:
    flow = PageFlow(slots=2, renderers=2, budget_bytes=10**9)
    for job in ("a", "b", "c", "d"):
        flow.admit(job)
        async with flow.render_turn(job) as rendered:
            rendered.size = 100
    assert flow.ready == 4 and flow.room() == 0  # nothing left to render, but a wave ahead
    async with flow.engine_turn("a", Rendered(100, waiting=True)):
        assert flow.ready == 3 and flow.room() == 0  # one in the engine, three ready
    assert flow.room() == 1  # the engine returned it


async def test_a_page_group_cancelled_while_waiting_for_the_engine_leaves_the_budget() -> None:
    flow = PageFlow(slots=1, renderers=1, budget_bytes=10**9)
    await flow.engine.acquire("other")
    flow.render.add_ready(700)

    async def send() -> None:
        async with flow.engine_turn("a", Rendered(700)):
            pass

    task = asyncio.create_task(send())
    await settle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert flow.render.ready_bytes == 0 and flow.engine.used == 1


async def test_waiting_for_room_ends_when_a_job_ends() -> None:
    flow = PageFlow(slots=1, renderers=1, budget_bytes=10**9)
    flow.admit("a")
    flow.plan("a", 2)
    waiting = asyncio.create_task(flow.wait_for_room(30))
    await settle()
    assert not waiting.done()
    flow.forget("a")
    await asyncio.wait_for(waiting, 5)
    assert flow.room() == 2
