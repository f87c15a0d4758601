"""The book's one procedure for empirical claims: intervals over seeds with the test set's own noise, and the rule
that turns them into verdicts, with its rules for several comparisons, rankings and a paper's effect size.

One implementation for every chapter (ARCHITECTURE.md, "The library's layers", layer 0), stated for readers on the
book's methods page (``book/methods.md``). An empirical claim of a paper ("focal loss lowers the ECE", "the ECE rises
after the learning-rate drop") is judged from several seeds, never from one run:

1. **The unit of replication is the seed.** A seed is a whole training run (initial weights, data order); the
   seeds of a grid share one test set. Runs that failed (a loss that did not train: accuracy more than 5 points
   below cross-entropy's, or a diverged run) are shown apart and never averaged in; a claim that needs them is
   untested, with that premise.
2. **Every interval carries the test set's own noise.** The mean over seeds of a metric, or of a paired difference
   of two settings on the same seeds, gets a Student-t interval (n - 1 degrees of freedom) whose standard error adds
   the seeds' spread and the test set's sampling variance of the mean, estimated by a bootstrap over test samples
   shared by every seed and both settings (:func:`~calib.stats.test_set.seed_test_interval`). Where the test samples
   are not at hand (a stored table of per-seed values), the interval is over seeds alone and says so.
3. **One rule.** :func:`~calib.stats.decisions.decide`: against 0 for a sign, against a practical margin of
   :data:`MARGINS` stated before any run for an effect that must matter; *holds* when the 95 % interval lies beyond
   it, *not-reproduced* when it lies on the other side, *inconclusive* otherwise. Given the paper's own effect size,
   an interval that excludes an effect that large decides "smaller than the paper's effect" (not-reproduced) instead
   of inconclusive (Schuirmann's equivalence reading).
4. **Several comparisons.** "Better than every baseline" needs every comparison at the unadjusted level
   (intersection-union, Berger 1982: no correction); "some part fails", "better than any", and a family of claims
   drawn from one grid use Holm's step-down correction (:func:`~calib.stats.decisions.combine`,
   :func:`~calib.stats.decisions.decide_every`, :func:`~calib.stats.decisions.decide_any`).
5. **Rankings against chance.** Kendall's tau between a paper's order and ours is tested by its exact permutation
   p-value (:func:`~calib.stats.ranks.rank_agreement_test`); a bootstrap of our own ranking
   (:func:`~calib.stats.ranks.kendall_tau_bootstrap`) says how stable tau is, not whether it beats chance.
6. **Power.** An inconclusive comparison reports the smallest effect our seeds detect with 80 % power, at the paired
   SD and at its 80 % upper confidence bound (an SD from 5 seeds has 4 degrees of freedom):
   :func:`~calib.stats.effects.power_line`.

The finite-sample bias of binned ECE (``calib.simulate.calibrated_ece_bias``, chapter 01) is a floor for a
**single** ECE against 0 ("this model is miscalibrated"); it is not a margin for a paired difference, whose two ECEs
carry nearly the same bias.

Submodules: :mod:`~calib.stats.intervals` (intervals over seeds), :mod:`~calib.stats.test_set` (the test set's
noise), :mod:`~calib.stats.decisions` (the rule and its multiple-comparison forms), :mod:`~calib.stats.ranks`
(rank agreement), :mod:`~calib.stats.effects` (effect sizes, the sign test, power). The verdict words are those of
the book's claims ledger (``calib_book.claims``, ARCHITECTURE.md).
"""

from calib.stats.decisions import (MARGINS, Decision, MultipleDecision, combine, decide, decide_any, decide_every,
                                   holm, margin, paired_t_p_value)
from calib.stats.effects import (PowerLine, SignTest, cohens_d, detectable_difference, power_line, sd_upper_bound,
                                 seeds_needed, sign_test)
from calib.stats.intervals import (ALTERNATIVES, DIRECTIONS, Interval, paired_bootstrap, paired_seed_interval,
                                   seed_interval)
from calib.stats.ranks import RankAgreement, RankTest, kendall_tau_bootstrap, rank_agreement_test
from calib.stats.test_set import (AdditiveStatistic, RememberedStatistic, ResampledStatistic, bootstrap_counts,
                                  resampled_variance, sampling_variance, seed_test_interval)

__all__ = ["MARGINS", "margin", "Interval", "Decision", "MultipleDecision", "decide", "combine", "decide_every",
           "decide_any", "paired_t_p_value", "holm", "seed_interval", "paired_seed_interval", "paired_bootstrap",
           "seed_test_interval", "sampling_variance", "resampled_variance", "bootstrap_counts", "AdditiveStatistic",
           "RememberedStatistic", "ResampledStatistic",
           "RankAgreement", "RankTest", "kendall_tau_bootstrap", "rank_agreement_test", "SignTest", "sign_test",
           "cohens_d", "detectable_difference", "seeds_needed", "sd_upper_bound", "PowerLine", "power_line",
           "DIRECTIONS", "ALTERNATIVES"]
