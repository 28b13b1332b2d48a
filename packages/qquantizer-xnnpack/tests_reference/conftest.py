import sys
from pathlib import Path

# reuse the parity helpers and the reference loader of the CI suite
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
