import asyncio

import resumable


def key():
    try:
        return resumable.idempotency_key()
    except resumable.ResumableError:
        return "-"


@resumable.step
def book(what):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{what}\t{key()}\n")
    return what


# A library awaitable that runs callbacks the program passes in: a plain function
# (no await of its own) and a coroutine function. The callbacks change the program's
# state and take steps; on a resume the library call runs again so they run again.
import types

LIBRARY = '''
import asyncio


class Download:
    """An awaitable that reports progress to a callback, then finishes."""

    def __init__(self, size, on_progress, on_done):
        self.size = size
        self.on_progress = on_progress
        self.on_done = on_done

    def __await__(self):
        return self._run().__await__()

    async def _run(self):
        got = 0
        while got < self.size:
            await asyncio.sleep(0)
            got = min(self.size, got + 4)
            self.on_progress(got)
        return await self.on_done(got)


async def quiet(value):
    await asyncio.sleep(0)
    return value * 2
'''
netlib = types.SimpleNamespace()
exec(compile(LIBRARY, "netlib.py", "exec"), netlib.__dict__)

progress = []


def report(got):
    progress.append(got)  # no await: only the flag at its start tells it ran


async def finished(got):
    await asyncio.sleep(0)
    book(f"finished {got}")
    return f"done {got}"


async def main():
    result = await netlib.Download(10, report, finished)
    print(result, progress)
    doubled = await netlib.quiet(21)  # runs no program code: answered from the log
    book(f"doubled {doubled}")
    second = await netlib.Download(5, lambda got: progress.append(-got), finished)
    return result, second, doubled


print(await main())
print("progress", progress)
