import sys
from pathlib import Path

# test_host_numerics reads test_flow's table (pytest runs in importlib mode)
sys.path.insert(0, str(Path(__file__).parent))
