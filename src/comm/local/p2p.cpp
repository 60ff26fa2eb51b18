// Point-to-point of the local engine: a message is copied once, from the sender's buffer straight
// into the receiver's, by whichever of the two arrives second.
#include "local_communicator.hpp"

#include <cpdit/core/error.hpp>

#include <algorithm>
#include <cstring>

namespace cpdit::comm::local {

namespace {

using State = Post::State;

// Removes a post that is still waiting for its match; it can never complete after this.
void withdraw(Group& group, Post& post) {
  auto channel = group.channels.find(post.key);
  auto& queue = post.is_send ? channel->second.sends : channel->second.recvs;
  queue.erase(std::find_if(queue.begin(), queue.end(), [&](const auto& p) { return p.get() == &post; }));
  if (channel->second.sends.empty() && channel->second.recvs.empty()) group.channels.erase(channel);
  post.state = State::failed;
  post.error = "this request was withdrawn after an earlier error";
}

class LocalRequest final : public Request {
 public:
  LocalRequest(std::shared_ptr<World> world, std::shared_ptr<Group> group, std::shared_ptr<Post> post,
               std::string what, int rank, int peer, std::chrono::milliseconds timeout)
      : world_(std::move(world)), group_(std::move(group)), post_(std::move(post)), what_(std::move(what)),
        rank_(rank), needed_{peer}, timeout_(timeout) {}

  // Never throws: withdraws an unmatched post, or lets a copy in flight finish.
  ~LocalRequest() override {
    std::unique_lock lock(world_->mutex);
    if (post_->state == State::posted) withdraw(*group_, *post_);
    world_->cv.wait(lock, [&] { return post_->state != State::copying; });
  }

  void wait() override {
    std::unique_lock lock(world_->mutex);
    auto deadline = Clock::now() + timeout_;
    auto result = world_->wait(lock, deadline, [&] { return finished(); }, needed_);
    // A copy in flight is finished by a live thread whatever else happened: wait for it.
    world_->cv.wait(lock, [&] { return post_->state != State::copying; });
    if (finished()) return check_copied();
    withdraw(*group_, *post_);
    world_->throw_wait(result, what_, rank_, needed_, timeout_);
  }

  bool test() override {
    std::unique_lock lock(world_->mutex);
    if (finished()) {
      check_copied();
      return true;
    }
    if (post_->state == State::copying) return false;
    auto result = world_->failed() ? World::Wait::failed
                  : world_->gone(needed_) >= 0 ? World::Wait::rank_gone
                                                : World::Wait::ready;
    if (result == World::Wait::ready) return false;
    withdraw(*group_, *post_);
    world_->throw_wait(result, what_, rank_, needed_, timeout_);
  }

 private:
  bool finished() const { return post_->state == State::done || post_->state == State::failed; }
  void check_copied() const { CPDIT_CHECK(post_->state == State::done, comm, post_->error); }

  std::shared_ptr<World> world_;
  std::shared_ptr<Group> group_;
  std::shared_ptr<Post> post_;
  std::string what_;
  int rank_;
  std::vector<int> needed_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<Request> LocalCommunicator::post(bool is_send, const void* send, void* recv, size_t bytes, int peer,
                                                 int tag) {
  const char* operation = is_send ? "send" : "recv";
  check_peer(peer, operation);
  CPDIT_CHECK(tag >= 0, invalid_argument, operation, " on rank ", world_rank_, ": tag must be >= 0, got ", tag);
  auto mine = std::make_shared<Post>();
  mine->send = send;
  mine->recv = recv;
  mine->bytes = bytes;
  mine->is_send = is_send;
  mine->key = is_send ? std::tuple(rank_, peer, tag) : std::tuple(peer, rank_, tag);
  auto request = [&] {
    return std::make_unique<LocalRequest>(world_, group_, mine,
                                          detail::concat(operation, " of ", bytes, " bytes ", is_send ? "to " : "from ",
                                                         name_peer(peer), " (tag ", tag, ")"),
                                          world_rank_, group_->world_ranks[peer], timeout());
  };

  std::shared_ptr<Post> match;
  {
    std::lock_guard lock(world_->mutex);
    if (world_->failed())
      fail(ErrorKind::comm, world_->failure(), " (rank ", world_rank_, " was starting a ", operation, ")");
    Channel& channel = group_->channels[mine->key];
    auto& waiting = is_send ? channel.recvs : channel.sends;
    if (waiting.empty()) {
      (is_send ? channel.sends : channel.recvs).push_back(mine);
      return request();
    }
    match = waiting.front();
    waiting.pop_front();
    if (channel.sends.empty() && channel.recvs.empty()) group_->channels.erase(mine->key);
    mine->state = match->state = State::copying;
  }

  const Post& sender = is_send ? *mine : *match;
  const Post& receiver = is_send ? *match : *mine;
  std::string error;
  if (sender.bytes != receiver.bytes) {
    int source = std::get<0>(mine->key), destination = std::get<1>(mine->key);
    error = detail::concat("message size mismatch: ", name_peer(source), " sends ", sender.bytes, " bytes (tag ", tag,
                           ") to ", name_peer(destination), ", which receives ", receiver.bytes);
  } else if (bytes > 0) {
    std::memcpy(receiver.recv, sender.send, bytes);
  }
  std::lock_guard lock(world_->mutex);
  for (Post* p : {mine.get(), match.get()}) {
    p->state = error.empty() ? State::done : State::failed;
    p->error = error;
  }
  world_->cv.notify_all();
  return request();
}

void LocalCommunicator::send(const void* data, size_t bytes, int peer, int tag) {
  post(true, data, nullptr, bytes, peer, tag)->wait();
}

void LocalCommunicator::recv(void* data, size_t bytes, int peer, int tag) {
  post(false, nullptr, data, bytes, peer, tag)->wait();
}

std::unique_ptr<Request> LocalCommunicator::isend(const void* data, size_t bytes, int peer, int tag) {
  return post(true, data, nullptr, bytes, peer, tag);
}

std::unique_ptr<Request> LocalCommunicator::irecv(void* data, size_t bytes, int peer, int tag) {
  return post(false, nullptr, data, bytes, peer, tag);
}

}  // namespace cpdit::comm::local
