# sys.stdout used as a text stream: reconfigure, encoding, isatty, the binary layer, writelines.
import asyncio
import sys

sys.stdout.reconfigure(line_buffering=True)
print("encoding", sys.stdout.encoding, "tty", sys.stdout.isatty(), "errors", sys.stdout.errors)
for i in range(3):
    sys.stdout.buffer.write(f"bytes {i}\n".encode())
    sys.stdout.writelines([f"line {i}\n", "é\n"])
    await asyncio.sleep(0)
out = sys.stdout
await asyncio.sleep(0)
out.write("through a variable\n")
sys.stdout.flush()
