#pragma once
// Children that outlive the thread that asked for them. The spawn sets PR_SET_PDEATHSIG (a child
// must not outlive a rank that is killed), and Linux sends that signal when the *thread* that
// cloned the child exits, not the process. A persistent reward worker or a server started by one
// scoring thread is used by others after it (a pool shared by threads), so those are cloned from
// one thread that lives as long as the process: the child then dies with the process only.
#include <functional>

namespace astraflow::detail {

// Runs `start` on the process's spawner thread (started on first use, never joined: it ends with
// the process) and waits for it; an exception it throws is rethrown here.
void runOnSpawnerThread(const std::function<void()>& start);

}  // namespace astraflow::detail
