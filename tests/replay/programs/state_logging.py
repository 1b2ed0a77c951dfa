# Logging configured by the program: to stdout and to a file, changed across statements.
import asyncio
import logging
import sys

logging.basicConfig(
    stream=sys.stdout, level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s"
)
log = logging.getLogger("app")
handler = logging.FileHandler("app.log", mode="w")
handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
log.addHandler(handler)
for i in range(3):
    log.info("step %d", i)
    await asyncio.sleep(0)
log.setLevel(logging.WARNING)
log.info("hidden")
await asyncio.sleep(0)
log.warning("visible")
print(
    "level",
    logging.getLevelName(log.level),
    "root",
    logging.getLevelName(logging.getLogger().level),
)
handler.close()
print(open("app.log").read(), end="")
