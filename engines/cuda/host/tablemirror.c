#include "tablemirror.h"

int tmr_diff(const int *table, const int *shadow, int n_synced, int n_need, int *first) {
    int same = n_synced < n_need ? n_synced : n_need;
    int i = 0;
    while (i < same && table[i] == shadow[i]) i++;
    *first = i;
    return i < n_need ? n_need - i : 0;
}
