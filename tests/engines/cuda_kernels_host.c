/* cuda_kernels_host.c - runs cuda_kernels.c and prints the tensor's sum after the run. */
#include <stdio.h>

int cuda_kernels_run(double* sum, int* launches);

int main(void) {
    double sum = 0;
    int launches = 0;
    int rc = cuda_kernels_run(&sum, &launches);
    printf("rc=%d sum=%g launches=%d\n", rc, sum, launches);
    return rc == 0 ? 0 : 1;
}
