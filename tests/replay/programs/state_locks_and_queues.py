# asyncio and threading locks, events and queues kept across statements.
import asyncio
import queue
import threading

lock = asyncio.Lock()
event = asyncio.Event()
jobs = asyncio.Queue()
for i in range(4):
    await jobs.put(i)
guard = threading.Lock()
backlog = queue.Queue()
backlog.put("x")
backlog.put("y")


async def worker(name):
    async with lock:
        item = await jobs.get()
        print(name, "got", item)
        await asyncio.sleep(0)
        jobs.task_done()


await worker("a")
await worker("b")
event.set()
print("event", event.is_set(), "left", jobs.qsize(), "locked", lock.locked())
with guard:
    print("backlog", backlog.get_nowait())
await asyncio.wait_for(event.wait(), 5)
await asyncio.gather(worker("c"), worker("d"))
await asyncio.wait_for(jobs.join(), 5)
print("done", jobs.qsize(), backlog.qsize(), guard.locked())
