// One-rank Communicator: every collective is a copy or nothing.
#include <cstdlib>
#include <cstring>

#include "parallel/communicator.h"

namespace dsv4 {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllGather: return "all_gather";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kBarrier: return "barrier";
    case Collective::kHeader: return "header";
  }
  return "?";
}

// Non-blocking defaults: the blocking call; the handle is complete.
Status Communicator::start_all_gather_rows(const void* send, std::span<const int64_t> rows, int64_t row_bytes,
                                           void* recv, PendingCollective* pending) {
  pending->comm_ = nullptr;
  return all_gather_rows(send, rows, row_bytes, recv);
}

Status Communicator::start_all_to_all_rows(const void* send, std::span<const int64_t> send_rows, void* recv,
                                           std::span<const int64_t> recv_rows, int64_t row_bytes,
                                           PendingCollective* pending) {
  pending->comm_ = nullptr;
  return all_to_all_rows(send, send_rows, recv, recv_rows, row_bytes);
}

Status Communicator::all_to_all_strided(const void* send, int64_t n, int64_t row_stride, int64_t peer_offset,
                                        void* recv, std::span<const int64_t> recv_rows, int64_t row_bytes) {
  if (size() != 1 || recv_rows.size() != 1 || recv_rows[0] != n)
    return Status::error("all_to_all_strided: not supported by this communicator beyond one rank");
  for (int64_t t = 0; t < n; ++t)
    std::memcpy(static_cast<char*>(recv) + t * row_bytes, static_cast<const char*>(send) + t * row_stride,
                static_cast<size_t>(row_bytes));
  count(Collective::kAllToAll, 0);
  return Status();
}

bool PendingCollective::test() {
  if (comm_ == nullptr) return true;
  if (!comm_->test_slot(slot_)) return false;
  comm_ = nullptr;
  return true;
}

Status PendingCollective::wait() {
  if (comm_ == nullptr) return Status();
  Communicator* c = comm_;
  comm_ = nullptr;
  return c->wait_slot(slot_);
}

namespace {

class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status all_gather_rows(const void* send, std::span<const int64_t> rows, int64_t row_bytes, void* recv) override {
    if (rows.size() != 1) return Status::errorf("all_gather_rows: {} row counts for 1 rank", rows.size());
    if (rows[0] > 0 && send != recv) std::memmove(recv, send, static_cast<size_t>(rows[0] * row_bytes));
    count(Collective::kAllGather, 0);
    return Status();
  }
  Status all_to_all_rows(const void* send, std::span<const int64_t> send_rows, void* recv,
                         std::span<const int64_t> recv_rows, int64_t row_bytes) override {
    if (send_rows.size() != 1 || recv_rows.size() != 1 || send_rows[0] != recv_rows[0])
      return Status::error("all_to_all_rows: one rank sends to itself exactly the rows it receives");
    if (send_rows[0] > 0 && send != recv) std::memmove(recv, send, static_cast<size_t>(send_rows[0] * row_bytes));
    count(Collective::kAllToAll, 0);
    return Status();
  }
  Status broadcast(void*, int64_t, int root) override {
    if (root != 0) return Status::errorf("broadcast: root {} outside [0, 1)", root);
    count(Collective::kBroadcast, 0);
    return Status();
  }
  Status barrier() override {
    count(Collective::kBarrier, 0);
    return Status();
  }
  Result<std::unique_ptr<Communicator>> split(int, int) override { return make_single_communicator(); }
  [[noreturn]] void abort(int code) override { std::exit(code); }
  Status send_header(std::span<const uint8_t>) override {
    count(Collective::kHeader, 0);
    return Status();
  }
  Status receive_header(std::vector<uint8_t>&) override {
    return Status::error("receive_header: one rank has no rank 0 to wait for");
  }
  void report_failure(const std::string& message) override {
    if (failure_.ok()) failure_ = Status::errorf("the job ended (rank 0 failed: {})", message);
  }
  Status job_status() const override { return failure_; }

 private:
  Status failure_;
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

}  // namespace dsv4
