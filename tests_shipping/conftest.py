import sys
from pathlib import Path

# the deployed-side script and the shared checks are plain modules here
sys.path.insert(0, str(Path(__file__).parent))
