/* Arrival processes of a serving workload (workload.requests.arrival, docs/serving.md):
 * when each request is sent, as offsets in s from the start, drawn from a seed so that
 * every variant and every repetition replays the same times.
 *
 *   all        every request at 0
 *   poisson    exponential gaps of mean 1/rate
 *   gamma      gamma gaps of mean 1/rate and shape `burstiness` (vLLM's --burstiness):
 *              coefficient of variation 1/sqrt(burstiness); 1 is Poisson, below 1 burstier,
 *              above 1 more regular
 *   constant   gaps of exactly 1/rate
 *   ramp       gaps of exactly 1/rate_i, rate_i rising (or falling) linearly from rate at
 *              the first request to rate_end at the last
 *
 * The first request arrives one gap after 0 (0 for `all`), as the Poisson arrivals of the
 * original serving kind did.
 */
#ifndef BENCH_ARRIVAL_H
#define BENCH_ARRIVAL_H

#include <stdint.h>

typedef enum ar_kind { AR_ALL, AR_POISSON, AR_GAMMA, AR_CONSTANT, AR_RAMP, AR_KIND_COUNT } ar_kind;

typedef struct ar_spec {
    ar_kind kind;
    double rate;            /* requests/s, > 0 but for `all` */
    double rate_end;        /* ramp: requests/s at the last request, > 0 */
    double burstiness;      /* gamma: the gaps' shape, > 0 */
} ar_spec;

/* "all", "poisson", ... -> AR_*; -1 for any other name. */
int ar_kind_from_name(const char *name);
const char *ar_kind_name(ar_kind k);

/* Offered rates, requests/s, at least and at most. At AR_MIN_RATE a request arrives every
 * 1000 s on average, and 100,000 of them (a scenario's most) end ~1e8 s in, a tenth of
 * AR_MAX_SECONDS; 1e-300 gave gaps no int64 of ns holds. */
#define AR_MIN_RATE 1e-3
#define AR_MAX_RATE 1e9
/* s of an arrival offset, at most: 1e18 ns, a ninth of what an int64 of ns holds (the
 * bound of a trace's timestamps, TR_MAX_SECONDS, for the same reason). */
#define AR_MAX_SECONDS 1e9

/* t[0 .. n): non-decreasing arrival offsets in s, deterministic in seed. Returns 0, or -1
 * when the spec is out of range (a rate <= 0, a burstiness <= 0) or an offset would pass
 * AR_MAX_SECONDS. */
int ar_times(const ar_spec *a, int n, uint64_t seed, double *t);

/* One gamma draw of shape k > 0 and scale 1 (Marsaglia and Tsang), from *state. */
double ar_gamma(uint64_t *state, double k);

#endif
