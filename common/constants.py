"""Named constants shared by entities and the coordinator."""

# Bytes of array payload per stream message: well below gRPC's default 4 MB cap.
CHUNK_BYTES = 1 << 20

# The receiver refuses to allocate more than this for one array (absurd-size guard).
MAX_ARRAY_BYTES = 8 << 30

# Fraction of rows used as the reduced kernel's Abar in the pooled reference (Mangasarian & Wild).
REFERENCE_ROW_FRACTION = 0.10

# Default cross-validation grids: nu over decades; mu relative to 1/n (features scaled to [0, 1]).
NU_GRID = (1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
MU_GRID_TIMES_N = (0.0625, 0.25, 1.0, 4.0, 16.0)
DEFAULT_FOLDS = 5

# Seconds a coordinator waits for an entity call before giving up (per call).
DEFAULT_DEADLINE_S = 120.0
