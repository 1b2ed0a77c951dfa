# A ContextVar set in one statement and reset with its token in a later one.
import asyncio
import contextvars

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


request = contextvars.ContextVar("request", default="none")


@resumable.step
async def call(what):
    await asyncio.sleep(0)
    return f"{what} done"


token = request.set("outer")
print("set", request.get(), token.var.name)
r = await call(request.get())
book(r)
inner = request.set("inner")
print("inner", request.get(), inner.old_value)
r = await call(request.get())
request.reset(inner)
print("after inner reset", request.get())
book(r)
request.reset(token)
print("after reset", request.get())
