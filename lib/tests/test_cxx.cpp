// test_cxx - shoal.h from C++: it compiles without warnings as C++ (extern "C", no C-only
// constructs), links against libshoal.so with mpicxx, and a checkpoint round trip works.
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
    check(shoal_checkpoint() == SHOAL_SUCCESS, "shoal_checkpoint");
    check(shoal_unprotect(3) == SHOAL_ERR_NOTFOUND, "SHOAL_ERR_NOTFOUND from C++");
    check(std::strcmp(shoal_strerror(SHOAL_ERR_ARG), "invalid argument") == 0, "shoal_strerror");
    check(shoal_version_number() == SHOAL_VERSION_NUMBER, "shoal_version_number");
    check(shoal_finalize() == SHOAL_SUCCESS, "shoal_finalize");
    std::printf("%d passed, %d failed\n", 7 - failed, failed);
    MPI_Finalize();
    return failed != 0;
}
