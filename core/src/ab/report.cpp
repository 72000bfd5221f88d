#include "ab/report.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "specd/error.hpp"

namespace specd::ab {
namespace {

using speculative::AbRecord;
using speculative::AbShadowTrace;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A log line longer than this is refused before it is parsed (a request of 100k steps is ~1 MB).
constexpr size_t kMaxLineBytes = size_t{16} << 20;  // a record of 128k steps with 8 shadow arms is ~11 MB
constexpr size_t kAllPairsArms = 8;                 // more arms: each is compared with the most-served one

// ---- units of the bootstrap: one request each --------------------------------------------------

// A request its arm served.
struct Unit {
  double drafted = 0, accepted = 0, steps = 0, generated = 0, decode_steps = 0;
  double logprob = 0, logprob_tokens = 0, tpot = 0, latency = 0;
  std::vector<double> drafted_at, accepted_at;
};

// A request of serving arm x that shadow arm y verified too: both on the steps y verified.
struct PairUnit {
  double steps = 0;
  double x_drafted = 0, x_accepted = 0, y_drafted = 0, y_accepted = 0;
  double compared = 0, differing = 0, logprob = 0, logprob_tokens = 0, verify_s = 0, step_s = 0;
  std::vector<double> drafted_at, accepted_at;  // y's
};

void add_positions(std::vector<double>& drafted_at, std::vector<double>& accepted_at, int32_t drafted,
                   int32_t accepted) {
  if (drafted_at.size() < static_cast<size_t>(drafted)) {
    drafted_at.resize(static_cast<size_t>(drafted), 0);
    accepted_at.resize(static_cast<size_t>(drafted), 0);
  }
  for (int32_t i = 0; i < drafted; ++i) drafted_at[static_cast<size_t>(i)] += 1;
  for (int32_t i = 0; i < accepted; ++i) accepted_at[static_cast<size_t>(i)] += 1;
}

Unit serving_unit(const AbRecord& r) {
  Unit u;
  for (size_t i = 0; i < r.drafted.size(); ++i) {
    u.drafted += r.drafted[i];
    u.accepted += r.accepted[i];
    add_positions(u.drafted_at, u.accepted_at, r.drafted[i], r.accepted[i]);
  }
  u.steps = static_cast<double>(r.drafted.size());
  u.generated = r.generated_tokens;
  u.decode_steps = r.decode_steps;
  u.logprob = r.logprob_sum;
  u.logprob_tokens = static_cast<double>(r.logprob_tokens);
  u.tpot = r.tpot_s;
  u.latency = r.latency_s;
  return u;
}

PairUnit pair_unit(const AbRecord& r, const AbShadowTrace& s) {
  PairUnit u;
  for (size_t i = 0; i < r.drafted.size(); ++i) {
    if (s.accepted[i] < 0) continue;
    u.steps += 1;
    u.x_drafted += r.drafted[i];
    u.x_accepted += r.accepted[i];
    u.y_drafted += s.drafted[i];
    u.y_accepted += s.accepted[i];
    add_positions(u.drafted_at, u.accepted_at, s.drafted[i], s.accepted[i]);
  }
  u.compared = static_cast<double>(s.compared_tokens);
  u.differing = static_cast<double>(s.differing_tokens);
  u.logprob = s.logprob_sum;
  u.logprob_tokens = static_cast<double>(s.logprob_tokens);
  u.verify_s = s.verify_s;
  u.step_s = r.step_s;
  return u;
}

// Σ num / Σ den over the resampled units.
template <class U, class Num, class Den>
Bootstrap::Statistic ratio(const std::vector<U>& units, Num num, Den den) {
  return [&units, num, den](std::span<const uint32_t> idx) {
    double n = 0, d = 0;
    for (uint32_t i : idx) {
      n += num(units[i]);
      d += den(units[i]);
    }
    return d > 0 ? n / d : kNaN;
  };
}

// y's acceptance rate minus x's, each a ratio of sums over the same steps.
Bootstrap::Statistic delta_rate(const std::vector<PairUnit>& units) {
  return [&units](std::span<const uint32_t> idx) {
    double ya = 0, yd = 0, xa = 0, xd = 0;
    for (uint32_t i : idx) {
      ya += units[i].y_accepted;
      yd += units[i].y_drafted;
      xa += units[i].x_accepted;
      xd += units[i].x_drafted;
    }
    return yd > 0 && xd > 0 ? ya / yd - xa / xd : kNaN;
  };
}

Bootstrap::Statistic percentile(const std::vector<Unit>& units, double Unit::*field, double p) {
  return [&units, field, p](std::span<const uint32_t> idx) {
    std::vector<double> v;
    v.reserve(idx.size());
    for (uint32_t i : idx) v.push_back(units[i].*field);
    return quantile(v, p);
  };
}

template <class U>
std::vector<Estimate> per_position(const Bootstrap& boot, const std::string& label, const std::vector<U>& units) {
  size_t positions = 0;
  for (const U& u : units) positions = std::max(positions, u.drafted_at.size());
  std::vector<Estimate> out;
  for (size_t p = 0; p < positions; ++p) {
    auto at = [p](const std::vector<double>& v) { return p < v.size() ? v[p] : 0.0; };
    out.push_back(boot.interval(
        label + "/at" + std::to_string(p), units.size(),
        ratio(
            units, [&](const U& u) { return at(u.accepted_at); }, [&](const U& u) { return at(u.drafted_at); })));
  }
  return out;
}

// [a] fraction of steps that accepted a drafts.
std::vector<double> length_fraction(const std::vector<int32_t>& accepted_counts) {
  std::vector<double> f;
  size_t steps = 0;
  for (int32_t a : accepted_counts) {
    if (a < 0) continue;
    if (f.size() <= static_cast<size_t>(a)) f.resize(static_cast<size_t>(a) + 1, 0);
    f[static_cast<size_t>(a)] += 1;
    ++steps;
  }
  for (double& x : f) x /= static_cast<double>(steps);
  return f;
}

// ---- per arm --------------------------------------------------------------------------------

ArmStats arm_stats(const Bootstrap& boot, const std::vector<const AbRecord*>& records) {
  ArmStats a;
  const AbRecord& first = *records.front();
  a.name = first.arm;
  a.verifier = first.verifier;
  a.lossless = first.lossless;
  std::vector<Unit> units;
  std::vector<int32_t> all_accepted;
  for (const AbRecord* r : records) {
    a.k = std::max(a.k, r->k);
    if (!r->completed()) continue;
    units.push_back(serving_unit(*r));
    a.tpot_sorted.push_back(r->tpot_s);
    all_accepted.insert(all_accepted.end(), r->accepted.begin(), r->accepted.end());
  }
  a.requests = units.size();
  a.steps = all_accepted.size();
  std::sort(a.tpot_sorted.begin(), a.tpot_sorted.end());
  a.length_fraction = length_fraction(all_accepted);
  const std::string l = a.name + "/";
  const size_t n = units.size();
  a.acceptance_rate =
      boot.interval(l + "acceptance", n,
                    ratio(
                        units, [](const Unit& u) { return u.accepted; }, [](const Unit& u) { return u.drafted; }));
  const Estimate per_step =
      boot.interval(l + "length", n,
                    ratio(
                        units, [](const Unit& u) { return u.accepted; }, [](const Unit& u) { return u.steps; }));
  a.mean_acceptance_length = {1 + per_step.value, 1 + per_step.lo, 1 + per_step.hi};
  a.tokens_per_step = boot.interval(
      l + "tokens_per_step", n,
      ratio(
          units, [](const Unit& u) { return u.generated; }, [](const Unit& u) { return u.decode_steps; }));
  a.mean_logprob = boot.interval(
      l + "logprob", n,
      ratio(
          units, [](const Unit& u) { return u.logprob; }, [](const Unit& u) { return u.logprob_tokens; }));
  a.tpot_p50 = boot.interval(l + "tpot50", n, percentile(units, &Unit::tpot, 0.50));
  a.tpot_p90 = boot.interval(l + "tpot90", n, percentile(units, &Unit::tpot, 0.90));
  a.tpot_p99 = boot.interval(l + "tpot99", n, percentile(units, &Unit::tpot, 0.99));
  a.latency_p50 = boot.interval(l + "latency50", n, percentile(units, &Unit::latency, 0.50));
  a.latency_p90 = boot.interval(l + "latency90", n, percentile(units, &Unit::latency, 0.90));
  a.latency_p99 = boot.interval(l + "latency99", n, percentile(units, &Unit::latency, 0.99));
  a.acceptance_at = per_position(boot, l + "position", units);
  return a;
}

// ---- shadows and paired differences ---------------------------------------------------------

std::vector<PairUnit> pair_units(const std::vector<const AbRecord*>& records, const std::string& shadow) {
  std::vector<PairUnit> units;
  for (const AbRecord* r : records) {
    if (!r->completed()) continue;
    for (const AbShadowTrace& s : r->shadows)
      if (s.arm == shadow) units.push_back(pair_unit(*r, s));
  }
  return units;
}

ShadowStats shadow_stats(const Bootstrap& boot, const std::string& serving, const std::vector<const AbRecord*>& records,
                         const AbShadowTrace& example) {
  ShadowStats s;
  s.arm = example.arm;
  s.serving = serving;
  s.lossless = example.lossless;
  const std::vector<PairUnit> units = pair_units(records, s.arm);
  std::vector<int32_t> all_accepted;
  for (const AbRecord* r : records) {
    if (!r->completed()) continue;
    for (const AbShadowTrace& t : r->shadows)
      if (t.arm == s.arm) all_accepted.insert(all_accepted.end(), t.accepted.begin(), t.accepted.end());
  }
  s.length_fraction = length_fraction(all_accepted);
  s.requests = units.size();
  for (const PairUnit& u : units) s.steps += static_cast<size_t>(u.steps);
  const std::string l = s.arm + "@" + serving + "/";
  const size_t n = units.size();
  using U = PairUnit;
  s.acceptance_rate =
      boot.interval(l + "acceptance", n,
                    ratio(
                        units, [](const U& u) { return u.y_accepted; }, [](const U& u) { return u.y_drafted; }));
  const Estimate per_step =
      boot.interval(l + "length", n,
                    ratio(
                        units, [](const U& u) { return u.y_accepted; }, [](const U& u) { return u.steps; }));
  s.mean_acceptance_length = {1 + per_step.value, 1 + per_step.lo, 1 + per_step.hi};
  s.mean_logprob =
      boot.interval(l + "logprob", n,
                    ratio(
                        units, [](const U& u) { return u.logprob; }, [](const U& u) { return u.logprob_tokens; }));
  s.delta_acceptance_rate = boot.interval(l + "delta_acceptance", n, delta_rate(units));
  s.delta_mean_acceptance_length = boot.interval(
      l + "delta_length", n,
      ratio(
          units, [](const U& u) { return u.y_accepted - u.x_accepted; }, [](const U& u) { return u.steps; }));
  s.disagreement =
      boot.interval(l + "disagreement", n,
                    ratio(
                        units, [](const U& u) { return u.differing; }, [](const U& u) { return u.compared; }));
  s.cost = boot.interval(l + "cost", n,
                         ratio(
                             units, [](const U& u) { return u.verify_s; }, [](const U& u) { return u.step_s; }));
  s.acceptance_at = per_position(boot, l + "position", units);
  return s;
}

using Groups = std::map<std::string, std::vector<const AbRecord*>>;

// Y − X on the same steps, pooling requests X served with Y shadowing and Y served with X shadowing.
void paired_differences(const Bootstrap& boot, const std::string& x, const std::string& y, const Groups& groups,
                        std::vector<Difference>& out) {
  std::vector<PairUnit> units;
  if (auto it = groups.find(x); it != groups.end()) units = pair_units(it->second, y);
  if (auto it = groups.find(y); it != groups.end()) {
    for (PairUnit u : pair_units(it->second, x)) {  // y served: swap the roles
      std::swap(u.x_drafted, u.y_drafted);
      std::swap(u.x_accepted, u.y_accepted);
      units.push_back(std::move(u));
    }
  }
  if (units.empty()) return;
  const std::string l = "paired/" + x + "/" + y + "/";
  const Estimate rate = boot.interval(l + "acceptance", units.size(), delta_rate(units));
  const Estimate length = boot.interval(l + "length", units.size(),
                                        ratio(
                                            units, [](const PairUnit& u) { return u.y_accepted - u.x_accepted; },
                                            [](const PairUnit& u) { return u.steps; }));
  out.push_back({"acceptance rate", x, y, true, units.size(), rate});
  out.push_back({"mean acceptance length", x, y, true, units.size(), length});
}

// Y − X between the requests each arm served (traffic split).
void unpaired_differences(const Bootstrap& boot, const std::string& x, const std::string& y, const Groups& groups,
                          std::vector<Difference>& out) {
  auto units_of = [&](const std::string& arm) {
    std::vector<Unit> u;
    for (const AbRecord* r : groups.at(arm))
      if (r->completed()) u.push_back(serving_unit(*r));
    return u;
  };
  const std::vector<Unit> ux = units_of(x), uy = units_of(y);
  if (ux.empty() || uy.empty()) return;
  const std::string l = "split/" + x + "/" + y + "/";
  auto diff = [&](const char* metric, const Bootstrap::Statistic& fx, const Bootstrap::Statistic& fy) {
    const Estimate d =
        boot.interval(l + metric, ux.size(), uy.size(),
                      [&](std::span<const uint32_t> a, std::span<const uint32_t> b) { return fy(b) - fx(a); });
    out.push_back({metric, x, y, false, ux.size() + uy.size(), d});
  };
  auto acc = [](const Unit& u) { return u.accepted; };
  diff("acceptance rate", ratio(ux, acc, [](const Unit& u) { return u.drafted; }),
       ratio(uy, acc, [](const Unit& u) { return u.drafted; }));
  diff("mean acceptance length", ratio(ux, acc, [](const Unit& u) { return u.steps; }),
       ratio(uy, acc, [](const Unit& u) { return u.steps; }));
  auto gen = [](const Unit& u) { return u.generated; };
  auto dsteps = [](const Unit& u) { return u.decode_steps; };
  diff("tokens per step", ratio(ux, gen, dsteps), ratio(uy, gen, dsteps));
  diff("TPOT p50 (s)", percentile(ux, &Unit::tpot, 0.5), percentile(uy, &Unit::tpot, 0.5));
  diff("latency p50 (s)", percentile(ux, &Unit::latency, 0.5), percentile(uy, &Unit::latency, 0.5));
  auto lp = [](const Unit& u) { return u.logprob; };
  auto lpt = [](const Unit& u) { return u.logprob_tokens; };
  diff("mean log p", ratio(ux, lp, lpt), ratio(uy, lp, lpt));
}

// Reads one line (without its '\n') into `line`; false at the end of the input. Stops reading
// once the line holds more than `max` bytes (the caller refuses it), so an endless line never
// grows past max + one chunk.
bool read_line_limited(std::istream& in, std::string& line, size_t max) {
  line.clear();
  char buf[4096];
  // Room for the longest line once (untouched pages cost no memory): the string never doubles
  // past the limit while it grows (a refused 100 MB line peaked at 136 MB of RSS).
  if (line.capacity() < max + sizeof(buf)) line.reserve(max + sizeof(buf));
  bool any = false;
  while (line.size() <= max) {
    in.getline(buf, sizeof(buf));
    const auto got = static_cast<size_t>(in.gcount());
    if (in.bad()) return false;
    if (got == 0 && in.eof()) return any;
    any = true;
    if (!in.fail()) {  // a whole line (its '\n' was read and counted)
      line.append(buf, got > 0 && !in.eof() ? got - 1 : got);
      return true;
    }
    line.append(buf, got);  // the buffer filled before a '\n': go on
    if (in.eof()) return true;
    in.clear();
  }
  return true;
}

}  // namespace

std::vector<speculative::AbRecord> read_ab_logs(const std::vector<std::string>& files) {
  std::vector<AbRecord> out;
  for (const std::string& file : files) {
    std::error_code ec;
    const auto status = std::filesystem::status(file, ec);
    if (ec || !std::filesystem::exists(status)) throw Error(ErrorCode::kNotFound, "cannot read A/B log " + file);
    // Regular files only: a FIFO would block the report forever, /dev/zero would never end a line.
    if (!std::filesystem::is_regular_file(status))
      throw Error(ErrorCode::kInvalidArgument, "A/B log " + file + ": not a regular file");
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(ErrorCode::kNotFound, "cannot read A/B log " + file);
    std::string line;
    for (size_t n = 1; read_line_limited(in, line, kMaxLineBytes); ++n) {
      if (line.size() > kMaxLineBytes)
        throw Error(ErrorCode::kInvalidArgument, file + ":" + std::to_string(n) + ": line longer than 16 MiB");
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      out.push_back(speculative::parse_ab_line(line, file + ":" + std::to_string(n)));
    }
  }
  return out;
}

namespace {

Report assemble(const std::vector<AbRecord>& records, const Bootstrap& boot) {
  Report rep;
  rep.records = records.size();
  rep.seed = boot.seed();
  rep.resamples = boot.resamples();
  std::vector<std::string> order;  // arms by name, so a report does not depend on finishing order
  Groups groups;
  auto see = [&](const std::string& arm) {
    if (std::find(order.begin(), order.end(), arm) == order.end()) order.push_back(arm);
  };
  for (const AbRecord& r : records) {
    see(r.arm);
    for (const AbShadowTrace& s : r.shadows) see(s.arm);
    groups[r.arm].push_back(&r);
    if (r.completed()) ++rep.completed;
  }
  std::sort(order.begin(), order.end());
  for (const std::string& arm : order) {
    auto it = groups.find(arm);
    if (it == groups.end()) continue;
    rep.arms.push_back(arm_stats(boot, it->second));
    std::map<std::string, const AbShadowTrace*> shadows;  // the shadow arms of its requests, an example trace each
    for (const AbRecord* r : it->second)
      for (const AbShadowTrace& s : r->shadows) shadows.emplace(s.arm, &s);
    for (const auto& [name, example] : shadows) rep.shadows.push_back(shadow_stats(boot, arm, it->second, *example));
  }
  // Every pair of arms up to kAllPairsArms arms; beyond, each arm against the one that served
  // the most requests (linear in the arms: 1,000 one-request arms took over a minute in pairs).
  auto compare = [&](const std::string& x, const std::string& y) {
    paired_differences(boot, x, y, groups, rep.differences);
    if (groups.count(x) && groups.count(y)) unpaired_differences(boot, x, y, groups, rep.differences);
  };
  if (order.size() <= kAllPairsArms) {
    for (size_t i = 0; i < order.size(); ++i)
      for (size_t j = i + 1; j < order.size(); ++j) compare(order[i], order[j]);
  } else {
    const std::string* base = &order.front();
    for (const std::string& arm : order) {
      const auto served = [&](const std::string& a) { return groups.count(a) ? groups.at(a).size() : size_t{0}; };
      if (served(arm) > served(*base)) base = &arm;
    }
    for (const std::string& arm : order)
      if (arm != *base) compare(std::min(arm, *base), std::max(arm, *base));
  }
  return rep;
}

}  // namespace

Report build_report(const std::vector<AbRecord>& records, const ReportOptions& options) {
  // A first pass with point estimates only measures what one resample of the whole report costs.
  const Bootstrap plan(options.seed, 0);
  (void)assemble(records, plan);
  const uint64_t per_resample = std::max<uint64_t>(1, plan.units_per_resample());
  auto resamples = static_cast<int>(
      std::min<uint64_t>(static_cast<uint64_t>(std::max(0, options.resamples)), options.max_draw_units / per_resample));
  if (resamples < std::min(kMinResamples, options.resamples)) resamples = 0;
  Report rep = assemble(records, Bootstrap(options.seed, resamples));
  rep.requested_resamples = options.resamples;
  return rep;
}

}  // namespace specd::ab
