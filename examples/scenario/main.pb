# DataAgent
An agent that greets the user, asks a helper playbook for a number, fetches data
from the outside world, processes it, and reports the result.

## Main
### Triggers
- At the beginning
### Steps
- Greet the user
- If a number is needed, call SomePlaybook, keep its result as $x and tell the user
- Fetch data with FetchData, tell the user, process it with ProcessData and tell the user
- End by telling the user both results and return the processed value

## SomePlaybook
Works out a number for Main.
### Steps
- Think about the question
- Return the number

```python
import os

import resumable


@playbook
async def FetchData() -> dict:
    """Fetches data from an external service (an effect: it appends to a ledger)."""
    ledger = os.environ.get("SCENARIO_LEDGER", "scenario-ledger.txt")
    with open(ledger, "a", encoding="utf-8") as out:
        out.write(f"FetchData {resumable.idempotency_key()}\n")
    return {"items": [3, 5, 8], "source": "inventory"}


@playbook
async def ProcessData(data: dict) -> int:
    """Processes fetched data into one number."""
    return sum(data["items"]) * 2
```
