import sys
from pathlib import Path

# the parity helpers (models, annotation text, torchao loader) are plain modules here
sys.path.insert(0, str(Path(__file__).parent))
