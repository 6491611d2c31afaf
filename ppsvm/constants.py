"""Named constants shared by entities and the coordinator."""

TASKS = ("classify", "regress")

# Bytes of array payload per stream message: well below gRPC's default 4 MB cap.
CHUNK_BYTES = 1 << 20

# The receiver refuses to allocate more than this for one array (absurd-size guard).
MAX_ARRAY_BYTES = 8 << 30

# Fraction of rows used as the reduced kernel's Abar in the pooled reference (Mangasarian & Wild).
REFERENCE_ROW_FRACTION = 0.10
# ... and never more than this many points (the papers' datasets stay below it): one LP iteration costs
# rows x points^2, so 10% of 200,000 rows (20,000 points) would take hours and a 32 GB K.
MAX_BASIS_POINTS = 500

# Default cross-validation grids. nu weighs the errors in the classification LP but ||u||_1 in
# the regression LP, so small nu means weak regularisation there: the grids run opposite ways.
NU_GRID_CLASSIFY = (1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
NU_GRID_REGRESS = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1)
# Gaussian widths times n (features scaled to [0, 1], so squared distances are of order n).
# WDBC's best widths reached the low end of 1/16..64 in 4 of 10 folds, sinc's the high end.
MU_GRID_TIMES_N = (1 / 64, 1 / 16, 1 / 4, 1.0, 4.0, 16.0, 64.0, 256.0)
DEFAULT_FOLDS = 5
# The nested uniform design's range of log10 nu: Mangasarian & Wild section 4 for classification; for
# regression the grid's range above (nu weighs ||u||_1 there).
UD_LOG10_NU_CLASSIFY = (-7.0, 7.0)
UD_LOG10_NU_REGRESS = (-7.0, 1.0)

# Seconds a coordinator waits for an entity call before giving up (per call).
DEFAULT_DEADLINE_S = 120.0
# An unreachable entity (UNAVAILABLE) is tried this many times in all, waiting
# RETRY_BACKOFF_S, then twice that, ... in between: rides out a restart, bounded.
RETRY_ATTEMPTS = 4
RETRY_BACKOFF_S = 0.5
# A client pings its peer after this many seconds without hearing from it during a call, and gives the
# connection up when the ping is not answered within KEEPALIVE_TIMEOUT_S: a cable pulled in the middle of a
# kernel stream fails the call in about 20 s, not at its deadline (DEFAULT_DEADLINE_S).
KEEPALIVE_TIME_S = 10.0
KEEPALIVE_TIMEOUT_S = 10.0

# Threads of every gRPC server (entity, prediction service). One caller may run at most
# MAX_CALLS_PER_PEER calls at once (more get RESOURCE_EXHAUSTED), so it can never hold them all;
# 8 leaves room for `coordinator serve`, which asks an entity once per concurrent Predict and
# serves up to 8 of them for one client name. Both can be changed per server (ppsvm.wire.server).
SERVER_WORKERS = 16
MAX_CALLS_PER_PEER = 8
# Seconds one message of a server stream may wait for its reader before the stream is cancelled:
# a 1 MiB chunk takes milliseconds on any network ppsvm runs on; a reader that stopped reading
# would otherwise hold a server thread for ever.
STREAM_WRITE_TIMEOUT_S = 60.0
# Seconds a stopping server (entity or `coordinator serve`) lets the calls in flight finish.
SHUTDOWN_GRACE_S = 2.0
# Seconds a health check (`ppsvm health`, `coordinator status`) may take: a live server answers in
# milliseconds, fresh TLS handshake included; probes must not hang on one that does not.
HEALTH_DEADLINE_S = 5.0

# Most bin edges a DpScoreHistogram request may name (B + 1 bins): bounds the noise an entity draws and the
# reply's size; the privacy of the release does not depend on it (sensitivity 2 for any number of bins).
MAX_HISTOGRAM_EDGES = 1024

# Longest line read from a CSV file (a cell or a dataset), in characters: a sane record is a few
# kB; a line of gigabytes would otherwise be read whole and end in MemoryError.
MAX_CSV_LINE_CHARS = 1 << 20

# Where the random-kernel training holds K and solves the LP: in this process, or in row chunks on Dask workers
# (ppsvm.core.dask_engine); and the worker processes of the local cluster started when no scheduler is named.
ENGINES = ("numpy", "dask")
DEFAULT_DASK_WORKERS = 2
