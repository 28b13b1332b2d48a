import sys
from pathlib import Path

# the flow helpers are a plain module next to the tests (pytest runs in importlib mode)
sys.path.insert(0, str(Path(__file__).parent))
