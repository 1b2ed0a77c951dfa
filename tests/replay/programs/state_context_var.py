# A ContextVar set in one statement and read in later ones.
import asyncio
import contextvars

request_id = contextvars.ContextVar("request_id", default="none")
attempt = contextvars.ContextVar("attempt")
print("before", request_id.get())
request_id.set("req-7")
attempt.set(1)
await asyncio.sleep(0)


async def handler():
    await asyncio.sleep(0)
    return f"handled {request_id.get()} attempt {attempt.get()}"


print(await handler())
attempt.set(attempt.get() + 1)
await asyncio.sleep(0)
print("later", request_id.get(), attempt.get())
print(await asyncio.create_task(handler()))
