#include "engine/sampling/distribution.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace hearth {
namespace {

// Top-k up to this size is kept in a heap during one pass over the logits: a logit that does
// not beat the worst kept one costs one compare, and for k = 40 over 262,144 logits only a few
// hundred get in. Larger k: nth_element over all candidates.
constexpr int32_t kHeapTopKMax = 1024;

// Without top-k, top-p finds its cut with a histogram of d = max_logit - logit: bucket
// b = floor(d * kBucketsPerNat) for d < kBucketSpanNats, everything further in the last one.
// Bucket order is best-first order, so only the bucket where the cumulative mass crosses
// top_p is sorted. 1/64 nat buckets hold ~1.5% of a flat vocabulary; past 32 nats a token
// weighs < exp(-32) = 1.3e-14 of the best one.
constexpr int32_t kBucketsPerNat = 64;
constexpr float kBucketSpanNats = 32.0f;
constexpr int32_t kBuckets = static_cast<int32_t>(kBucketsPerNat * kBucketSpanNats) + 1;

bool better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void select_top_k_heap(const float* logits, int32_t n_vocab, int32_t k, std::vector<Candidate>* out) {
  out->clear();
  // With `better` as the heap order, the front is the worst candidate kept. Ids arrive in
  // increasing order, so an equal logit later never beats a kept one: a strict > suffices.
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float l = logits[i];
    if (std::isnan(l)) continue;
    if (static_cast<int32_t>(out->size()) < k) {
      out->push_back({i, l, 0.0f});
      std::push_heap(out->begin(), out->end(), better);
    } else if (l > out->front().logit) {
      std::pop_heap(out->begin(), out->end(), better);
      out->back() = {i, l, 0.0f};
      std::push_heap(out->begin(), out->end(), better);
    }
  }
  std::sort(out->begin(), out->end(), better);
}

void select_top_k_partition(const float* logits, int32_t n_vocab, int32_t k, std::vector<Candidate>* out) {
  out->clear();
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (!std::isnan(logits[i])) out->push_back({i, logits[i], 0.0f});
  }
  if (static_cast<int32_t>(out->size()) > k) {
    std::nth_element(out->begin(), out->begin() + k, out->end(), better);
    out->resize(k);
  }
  std::sort(out->begin(), out->end(), better);
}

// Candidates with logit >= floor (NaN excluded), in id order.
void collect_above(const float* logits, int32_t n_vocab, float floor, std::vector<Candidate>* out) {
  out->clear();
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (logits[i] >= floor) out->push_back({i, logits[i], 0.0f});
  }
}

int32_t bucket_of(float logit, float max_logit) {
  const float d = max_logit - logit;  // >= 0; +inf for -inf logits
  return d < kBucketSpanNats ? static_cast<int32_t>(d * kBucketsPerNat) : kBuckets - 1;
}

// top-p without top-k: the smallest best-first set of tokens whose mass reaches top_p of the
// whole vocabulary, tokens below floor left out (min-p drops them anyway). *out: the tokens
// of the buckets before the crossing one in id order, then the crossing bucket's kept
// tokens best first. *crossing: scratch.
void top_p_by_buckets(const float* logits, int32_t n_vocab, float top_p, float max_logit, float floor,
                      std::vector<Candidate>* out, std::vector<Candidate>* crossing) {
  std::vector<double> mass(kBuckets, 0.0);
  double total = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float l = logits[i];
    if (std::isnan(l)) continue;
    const double w = std::exp(l - max_logit);
    mass[bucket_of(l, max_logit)] += w;
    total += w;
  }
  const double target = top_p * total;
  double before = 0.0;       // mass of the buckets before the crossing one
  int32_t cross = kBuckets;  // none crosses (rounding): keep all
  for (int32_t b = 0; b < kBuckets; ++b) {
    if (before + mass[b] >= target) {
      cross = b;
      break;
    }
    before += mass[b];
  }
  out->clear();
  crossing->clear();
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float l = logits[i];
    if (!(l >= floor)) continue;
    const int32_t b = bucket_of(l, max_logit);
    if (b < cross) {
      out->push_back({i, l, 0.0f});
    } else if (b == cross) {
      crossing->push_back({i, l, 0.0f});
    }
  }
  std::sort(crossing->begin(), crossing->end(), better);
  double cum = before;
  for (const Candidate& c : *crossing) {
    out->push_back(c);
    cum += std::exp(c.logit - max_logit);
    if (cum >= target) break;
  }
}

void set_single(int32_t id, float logit, std::vector<Candidate>* out) {
  out->clear();
  out->push_back({id, logit, 1.0f});
}

}  // namespace

int32_t argmax(const float* logits, int32_t n_vocab) {
  assert(n_vocab >= 1);
  int32_t best = 0;
  float best_logit = -std::numeric_limits<float>::infinity();
  bool found = false;
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (std::isnan(logits[i])) continue;
    if (!found || logits[i] > best_logit) {
      best = i;
      best_logit = logits[i];
      found = true;
    }
  }
  return best;
}

void compute_distribution(const float* logits, int32_t n_vocab, const SamplingParams& params,
                          std::vector<Candidate>* out) {
  assert(n_vocab >= 1);
  // A temperature so small that 1 / temperature overflows is greedy too.
  if (params.temperature <= 0.0f || !std::isfinite(1.0f / params.temperature)) {
    const int32_t id = argmax(logits, n_vocab);
    return set_single(id, logits[id], out);
  }
  const bool use_top_k = params.top_k > 0 && params.top_k < n_vocab;
  const bool use_top_p = params.top_p < 1.0f;
  const bool use_min_p = params.min_p > 0.0f;

  // 1. Candidates: the top k sorted best first, or without top-k the top-p set (or every
  //    token, or every token above the min-p floor) in no particular order.
  float max_logit;
  double top_p_mass = 0.0;  // top-k path only
  if (use_top_k) {
    if (params.top_k <= kHeapTopKMax) {
      select_top_k_heap(logits, n_vocab, params.top_k, out);
    } else {
      select_top_k_partition(logits, n_vocab, params.top_k, out);
    }
    if (out->empty()) return set_single(0, logits[0], out);  // all NaN
    max_logit = out->front().logit;
    if (!std::isfinite(max_logit)) return set_single(out->front().id, max_logit, out);
    for (const Candidate& c : *out) top_p_mass += std::exp(c.logit - max_logit);
  } else {
    const int32_t best = argmax(logits, n_vocab);
    max_logit = logits[best];
    if (!std::isfinite(max_logit)) return set_single(best, max_logit, out);
    // min-p keeps p >= min_p * p_max, i.e. logit >= max_logit + log(min_p). Collect with a
    // little slack; the exact test (step 3) is on exp(logit - max_logit).
    const float floor = use_min_p ? std::min(max_logit, max_logit + std::log(params.min_p) - 1e-3f)
                                  : -std::numeric_limits<float>::infinity();
    if (use_top_p) {
      std::vector<Candidate> crossing;
      top_p_by_buckets(logits, n_vocab, params.top_p, max_logit, floor, out, &crossing);
    } else {
      collect_above(logits, n_vocab, floor, out);
    }
  }

  // 2. top-p: the smallest best-first prefix whose probability reaches top_p (done above
  //    without top-k).
  if (use_top_k && use_top_p) {
    const double target = params.top_p * top_p_mass;
    double cum = 0.0;
    size_t keep = out->size();
    for (size_t i = 0; i < out->size(); ++i) {
      cum += std::exp((*out)[i].logit - max_logit);
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
    out->resize(keep);
  }

  // 3. min-p: drop tokens with p < min_p * p_max (the ratio is the same before and after
  //    renormalization). The best token has ratio 1 and always stays.
  if (use_min_p) {
    std::erase_if(*out, [&](const Candidate& c) {
      return c.logit != max_logit && !(std::exp(c.logit - max_logit) >= params.min_p);
    });
  }

  // 4. temperature and softmax over the survivors.
  const float inv_t = 1.0f / params.temperature;
  double total = 0.0;
  for (Candidate& c : *out) {
    c.p = std::exp((c.logit - max_logit) * inv_t);
    total += c.p;
  }
  const float inv_total = static_cast<float>(1.0 / total);
  for (Candidate& c : *out) c.p *= inv_total;
}

float log_softmax_top(const float* logits, int32_t n_vocab, int32_t token, int32_t n, std::vector<TokenScore>* top) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float max = kNegInf;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (std::isfinite(logits[i])) max = std::max(max, logits[i]);
  double sum = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (std::isfinite(logits[i])) sum += static_cast<double>(std::exp(logits[i] - max));
  const double lse = static_cast<double>(max) + std::log(sum);
  auto logprob = [&](int32_t i) {
    return std::isfinite(logits[i]) ? static_cast<float>(static_cast<double>(logits[i]) - lse) : kNegInf;
  };
  // The n best by a min-heap of (logit, -id): its top is the worst kept.
  auto worse = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> heap;
  heap.reserve(static_cast<size_t>(n) + 1);
  for (int32_t i = 0; i < n_vocab && n > 0; ++i) {
    if (!std::isfinite(logits[i])) continue;
    if (static_cast<int32_t>(heap.size()) < n) {
      heap.push_back(i);
      std::push_heap(heap.begin(), heap.end(), worse);
    } else if (worse(i, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      heap.back() = i;
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  }
  std::sort(heap.begin(), heap.end(), worse);
  top->clear();
  for (int32_t i : heap) top->push_back(TokenScore{i, logprob(i)});
  return token >= 0 && token < n_vocab ? logprob(token) : kNegInf;
}

}  // namespace hearth
