#include <stdint.h>
void rs_horizontal(const uint8_t *src, long stride, int c, int rows, uint8_t *dst, int ow, const int *first,
                   const int *count, const int32_t *k, int ks);
void rs_vertical(const uint8_t *src, int row, int base, uint8_t *dst, int oh, const int *first, const int *count,
                 const int32_t *k, int ks);
void normalize_chw(float *dst, const uint8_t *img, long n, const float *mean, const float *std);
