import sys
from pathlib import Path

# reuse the zoo, the annotation text form and the scenarios of the CI suite
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
