// events.cpp — an event is a counter of records and a counter of markers the streams reached.
// event_record enqueues a vesim marker (a callback after whose start the stream may count as
// idle, so stream_query right after event_synchronize sees it as of the event);
// stream_wait_event enqueues a callback that blocks the waiting stream's worker until the
// marker recorded before the call has run. A marker keeps
// the recording stream's pending error: event_synchronize returns it and takes it from the
// stream (vesimStreamClearError), so that stream_synchronize does not report it a second time.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "aurora.h"

struct UD_EventImpl {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t recorded = 0;   // markers enqueued
    uint64_t reached = 0;    // markers the stream has run
    uint64_t time_ns = 0;    // when the last marker ran
    VESIMresult status = VESIM_SUCCESS;  // the stream's pending error at the last marker
    std::string message;                 // its details, its id and stream (to take it)
    uint64_t error_id = 0;
    VESIMstream stream = nullptr;
  };
  int32_t device;
  std::shared_ptr<State> state = std::make_shared<State>();
};

namespace aurora {

namespace {

struct Marker {
  std::shared_ptr<UD_EventImpl::State> state;
  uint64_t seq;
};

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

void on_marker(VESIMstream stream, VESIMresult status, void* user) {
  std::unique_ptr<Marker> m(static_cast<Marker*>(user));
  std::lock_guard<std::mutex> lock(m->state->mu);
  if (m->seq > m->state->reached) {
    m->state->reached = m->seq;
    m->state->time_ns = now_ns();
    m->state->status = status;
    if (status != VESIM_SUCCESS) {  // the details of the pending error, as vesim hands them over
      m->state->message = vesimGetLastErrorDetail();
      m->state->error_id = vesimGetLastErrorId();
      m->state->stream = stream;
    }
  }
  m->state->cv.notify_all();
}

void on_wait(VESIMstream, VESIMresult, void* user) {
  std::unique_ptr<Marker> m(static_cast<Marker*>(user));
  std::unique_lock<std::mutex> lock(m->state->mu);
  m->state->cv.wait(lock, [&] { return m->state->reached >= m->seq; });
}

UD_Error* null_event(const char* what) {
  return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: event is NULL", what);
}

}  // namespace

UD_Error* event_create(int32_t device, UD_Event* event) {
  if (!event) return null_event("event_create");
  if (UD_Error* e = check_device(device)) return e;
  *event = new UD_EventImpl{device};
  return nullptr;
}

UD_Error* event_destroy(UD_Event event) {
  if (!event) return null_event("event_destroy");
  delete event;  // pending markers keep the state alive
  return nullptr;
}

UD_Error* event_record(UD_Event event, UD_Stream stream) {
  if (!event) return null_event("event_record");
  VESIMstream s;
  if (UD_Error* e = stream_of(stream, event->device, &s)) return e;
  std::lock_guard<std::mutex> lock(event->state->mu);  // the marker cannot run before we return
  auto* m = new Marker{event->state, event->state->recorded + 1};
  if (VESIMresult r = vesimStreamAddMarker(s, on_marker, m)) {
    delete m;
    return from_vesim(r, "event_record");
  }
  event->state->recorded++;
  return nullptr;
}

UD_Error* event_query(UD_Event event, int32_t* done) {
  if (!event) return null_event("event_query");
  if (!done) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "event_query: done is NULL");
  std::lock_guard<std::mutex> lock(event->state->mu);
  *done = event->state->reached >= event->state->recorded;
  return nullptr;
}

UD_Error* event_synchronize(UD_Event event) {
  if (!event) return null_event("event_synchronize");
  auto& st = *event->state;
  std::unique_lock<std::mutex> lock(st.mu);
  uint64_t target = st.recorded;
  st.cv.wait(lock, [&] { return st.reached >= target; });
  if (st.status == VESIM_SUCCESS) return nullptr;
  const VESIMresult status = st.status;
  const std::string message = st.message;
  VESIMstream stream = st.stream;
  const uint64_t id = st.error_id;
  lock.unlock();
  vesimStreamClearError(stream, id);  // INVALID_STREAM once the stream is gone: nothing to take
  return ud_kit_error(code_of(status), "aurora event_synchronize: work enqueued before the event "
                      "failed: %s (%s)", message.c_str(), vesimGetErrorName(status));
}

UD_Error* event_elapsed(UD_Event start, UD_Event end, double* milliseconds) {
  if (!start || !end) return null_event("event_elapsed");
  if (!milliseconds) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "event_elapsed: out is NULL");
  uint64_t t[2];
  UD_Event evs[2] = {start, end};
  for (int i = 0; i < 2; i++) {
    std::lock_guard<std::mutex> lock(evs[i]->state->mu);
    auto& st = *evs[i]->state;
    if (st.recorded == 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "event_elapsed: %s event was never recorded",
                          i ? "end" : "start");
    if (st.reached < st.recorded)
      return ud_kit_error(UD_ERR_NOT_READY, "event_elapsed: %s event not reached yet",
                          i ? "end" : "start");
    t[i] = st.time_ns;
  }
  *milliseconds = (double(t[1]) - double(t[0])) / 1e6;
  return nullptr;
}

UD_Error* stream_wait_event(UD_Stream stream, UD_Event event) {
  if (!event) return null_event("stream_wait_event");
  VESIMstream s;
  if (UD_Error* e = stream_of(stream, event->device, &s)) return e;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->state->mu);
    seq = event->state->recorded;
    if (seq == 0 || event->state->reached >= seq) return nullptr;  // nothing to wait for
  }
  auto* m = new Marker{event->state, seq};
  if (VESIMresult r = vesimStreamAddCallback(s, on_wait, m)) {
    delete m;
    return from_vesim(r, "stream_wait_event");
  }
  return nullptr;
}

}  // namespace aurora
