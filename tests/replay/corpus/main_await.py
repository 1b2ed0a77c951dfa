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


@resumable.step
async def fetch(url):
    await asyncio.sleep(0)
    return len(url)


async def crawl(urls, seen):
    sizes = {}
    for url in urls:
        if url in seen:
            continue
        seen.add(url)
        sizes[url] = await fetch(url)
        book(f"crawled {url}")
        print("crawled", url, sizes[url])
    return sizes


async def main():
    seen = set()
    first = await crawl(["a.com", "bb.com", "a.com"], seen)
    second = await crawl(["ccc.com", "bb.com", "dddd.com"], seen)
    total = sum(first.values()) + sum(second.values())
    print("total", total, "seen", sorted(seen))
    return total


result = await main()
print("result", result)
