// test_cxx - shoal.h from C++: it compiles without warnings as C++ (extern "C", no C-only
// constructs), links against libshoal.so with mpicxx, and a checkpoint round trip works,
// with per-rank, distributed and replicated regions.
#include <shoal.h>

#include <cstdio>
#include <cstring>
#include <vector>

static int failed = 0;

static void check(bool ok, const char *what)
{
    if (!ok) {
        std::printf("FAIL: %s\n", what);
        failed++;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    check(shoal_init(MPI_COMM_WORLD) == SHOAL_SUCCESS, "shoal_init");
    std::vector<double> v(100, 1.5);
    int step = 7;
    check(shoal_protect(1, &step, 1, MPI_INT) == SHOAL_SUCCESS, "shoal_protect(int)");
    check(shoal_protect(2, v.data(), v.size(), MPI_DOUBLE) == SHOAL_SUCCESS, "shoal_protect(vector)");
    std::vector<float> block(10, 2.5f), box(6, 0.5f);
    const int sizes[2] = {2, 3}, subsizes[2] = {2, 3}, starts[2] = {0, 0};
    check(shoal_protect_block(3, block.data(), block.size(), MPI_FLOAT, 10, 0) == SHOAL_SUCCESS &&
              shoal_protect_subarray(4, box.data(), 2, sizes, subsizes, starts, MPI_ORDER_C,
                                     MPI_FLOAT) == SHOAL_SUCCESS &&
              shoal_protect_replicated(5, &step, 1, MPI_INT) == SHOAL_SUCCESS,
          "shoal_protect_block, _subarray and _replicated");
    int nranks = 0;
    check(shoal_status() == SHOAL_FRESH && shoal_restart_nranks(&nranks) == SHOAL_ERR_NOCKPT,
          "SHOAL_FRESH and shoal_restart_nranks");
    check(shoal_checkpoint() == SHOAL_SUCCESS, "shoal_checkpoint");
    check(shoal_unprotect(6) == SHOAL_ERR_NOTFOUND, "SHOAL_ERR_NOTFOUND from C++");
    check(std::strcmp(shoal_strerror(SHOAL_ERR_ARG), "invalid argument") == 0, "shoal_strerror");
    check(shoal_version_number() == SHOAL_VERSION_NUMBER, "shoal_version_number");
    check(shoal_finalize() == SHOAL_SUCCESS, "shoal_finalize");
    std::printf("%d passed, %d failed\n", 9 - failed, failed);
    MPI_Finalize();
    return failed != 0;
}
