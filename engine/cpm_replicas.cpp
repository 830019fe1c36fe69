#include "engine/cpm_replicas.h"

#include <stdexcept>
#include <string>

namespace polymargin::engine {

CpmReplicas::CpmReplicas(const CpmConfig& config, const CpmProblem& problem, int local, int total,
                         int first)
    : total_(total), first_(first) {
  if (local < 1 || total < local || first < 0 || first + local > total)
    throw std::invalid_argument("CpmReplicas: replicas " + std::to_string(first) + " + " +
                                std::to_string(local) + " of " + std::to_string(total));
  for (int k = 0; k < local; ++k) {
    replicas_.push_back(std::make_unique<CpmTrainer>(config, problem));
    replicas_.back()->make_replica(first + k, total);
  }
}

void CpmReplicas::learn(const CsrView& window, const std::function<bool()>& spare) {
  if (replicas_.size() == 1) {
    replicas_.front()->learn(window, spare);
    return;
  }
  learn_shares(window, replicas_.size(),
               [&](std::size_t k, const CsrView& share) { replicas_[k]->learn(share, spare); });
}

void CpmReplicas::average(const Peers& peers) {
  if (total_ == 1) return;
  std::vector<CpmTrainer*> local;
  for (const auto& replica : replicas_) local.push_back(replica.get());
  CpmTrainer::average(local, first_ == 0, peers);
  done_ = lead_done();
}

bool CpmReplicas::done() const { return total_ == 1 ? lead().done() : done_; }

void CpmReplicas::spread_lead() {
  if (total_ == 1) return;
  CpmTrainer& lead = this->lead();
  lead.take_state(lead, first_ == 0);  // the run's counters are process 0's
  for (std::size_t k = 1; k < replicas_.size(); ++k) replicas_[k]->take_state(lead, false);
  done_ = lead_done();
}

std::vector<CpmTrainer::SideStatus> CpmReplicas::status() const {
  std::vector<CpmTrainer::SideStatus> status = lead().status();
  if (total_ > 1)
    for (auto& s : status) s.steps = s.run_steps;
  return status;
}

}  // namespace polymargin::engine
