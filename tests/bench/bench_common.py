"""What the benchmark scripts share: the environment mpirun needs here, and a one-line description of the CPU so
that every table says what it was measured on."""
import os
import platform

# Root in a container, more ranks than cores: let Open MPI run, and let waiting ranks yield their core.
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_mpi_yield_when_idle="1")


def cpu_features():
    """'x86_64, AVX2 + FMA' (the instruction sets the engine dispatches on)."""
    flags = set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":")[1].split())
                break
    except OSError:
        pass
    kind = "AVX-512" + (" BF16" if "avx512_bf16" in flags else "") if "avx512f" in flags else "AVX2" if "avx2" in flags else "?"
    return f"{platform.processor() or platform.machine()}, {kind}{' + FMA' if 'fma' in flags else ''}"
