# Cached functions that take steps: each step is booked once, across statements and in the
# statement in progress, and cache_info() is CPython's after every resume.
import asyncio
import functools

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
    return len(what)


@resumable.step
async def fetch(url):
    await asyncio.sleep(0)
    return f"<{url}>"


@functools.lru_cache(maxsize=2)
def price(item):
    return book(f"price {item}") * 10


@functools.cache
def tax(rate, *, region="eu"):
    return book(f"tax {rate} {region}") + rate


pages = {}


async def page(url):
    if url not in pages:
        pages[url] = await fetch(url)
        book(f"fetched {url}")
    return pages[url]


@functools.lru_cache(maxsize=None)
def lookup(word):
    return book(f"lookup {word}")


total = price("tea") + price("tea") + price("coffee")
print("total", total, price.cache_info())
print("tax", tax(2), tax(2, region="us"), tax(2), tax.cache_info())


async def shop(items):
    spent = 0
    for item in items:
        await page(item)
        spent += price(item) + tax(3)
        print("bought", item, spent, lookup(item))
    return spent


spent = await shop(["tea", "cake", "tea", "coffee", "cake", "tea"])
print("spent", spent, price.cache_info(), tax.cache_info(), lookup.cache_info())
lookup.cache_clear()
print("again", await shop(["cake", "jam"]), lookup.cache_info(), price.cache_info())
print("last", price("jam"), price("tea"), price.cache_info())
