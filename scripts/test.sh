#!/usr/bin/env bash
# The whole test command: installs what it needs, starts the servers the store tests
# use if they are down, then runs the quality gates and the test suite. Arguments go to
# pytest; `scripts/test.sh --quick` is the quick lane (below).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each `resumable` a test starts in a subprocess imports the package; with bytecode never
# written (PYTHONDONTWRITEBYTECODE) it would compile every module again (0.2 s a start).
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${RESUMABLE_PYCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/resumable-tests/pycache}"

# --quick: the gates, then the tests listed in tests/quick.txt; installs and starts nothing.
if [ "${1:-}" = "--quick" ]; then
  shift
  marks="not slow"
  pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || marks="$marks and not postgres"
  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || marks="$marks and not redis"
  ruff check src tests scripts examples && ruff format --check src tests scripts examples
  mypy src/resumable
  exec python -m pytest -m "$marks" $(grep -v '^#' tests/quick.txt) "$@"
fi

python -m pip install --quiet --disable-pip-version-check -e '.[dev,ui]'

# The browser tests (tests/ui) drive Debian's chromium through Playwright.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# PostgreSQL and Redis on 127.0.0.1 (the PostgreSQL/Redis store tests use them).
if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server >/dev/null
  fi
fi
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.5; done
fi

echo "== ruff check"; ruff check src tests scripts examples
echo "== ruff format --check"; ruff format --check src tests scripts examples
echo "== mypy"; mypy src/resumable
# Three pytest workers on two cores (RESUMABLE_TEST_WORKERS=0: one process), each given the
# next test as it finishes one: most tests wait on the `resumable` processes they start, and
# with two workers the cores sat idle a fifth of the time. pytest-benchmark, where it is
# installed, is off: under xdist it only warns.
echo "== pytest"
python -m pytest -n "${RESUMABLE_TEST_WORKERS:-3}" --dist worksteal -p no:benchmark "$@"

# The integrations again on the newest pydantic-ai-slim the [pydantic-ai] extra allows (the
# run above has the oldest, from the dev extra), in a venv kept between runs that sees this
# environment's packages. smolagents' newest release is the one the dev extra installs.
NEWEST_PYDANTIC_AI="2.68.0"
NEWEST_VENV="${RESUMABLE_NEWEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/resumable-tests/venv-newest}"
if [ ! -x "$NEWEST_VENV/bin/python" ]; then
  python -m venv --system-site-packages "$NEWEST_VENV"
fi
# (pip notes that pydantic-ai-harness pins the oldest: the comparison runs use it as it is)
"$NEWEST_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "pydantic-ai-slim==$NEWEST_PYDANTIC_AI"
echo "== pytest tests/integrations/test_pydantic_ai.py on pydantic-ai-slim $NEWEST_PYDANTIC_AI"
"$NEWEST_VENV/bin/python" -m pytest tests/integrations/test_pydantic_ai.py -p no:cacheprovider
