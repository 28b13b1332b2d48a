import sys
from pathlib import Path

# the parity helpers (models, annotation text form) are plain modules next to the tests
sys.path.insert(0, str(Path(__file__).parent))
