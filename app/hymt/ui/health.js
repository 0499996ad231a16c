// The server's state from /health, polled: the status line, the model and its license, the options it offers.
// While a refused translation waits to be sent again, the status line says that instead.
import { t, tell } from "./i18n.js";
import { showInstructions, showQuality } from "./options.js";
import { $ } from "./state.js";

let last = null;  // the last /health answer, or "unreachable"
let retryIn = null;  // seconds until a refused translation is sent again, while one waits

function statusText(h) {
  if (h === "unreachable") return t("serverDown");
  const where = h.gpu_memory_total_gb ? t("onGpu", { used: h.gpu_memory_used_gb, total: h.gpu_memory_total_gb })
    : t("onCpu");
  const waiting = h.queue_depth ? t("waiting", { n: h.queue_depth }) : "";
  const words = {
    healthy: () => t("healthy", { where, profile: h.profile, waiting }),
    degraded: () => t("degraded", { waiting, profile: h.profile }),
    loading: () => t("loading", { phase: h.phase || t("loadingModel") }),
    draining: () => t("draining"),
    unhealthy: () => t("unhealthy", { error: h.error || t("cannotTranslate") }),
  };
  return words[h.status] ? words[h.status]() : h.status;
}

export function showStatus(seconds = null) {
  // seconds: a refused translation is sent again in that many; none: the server's state again.
  retryIn = seconds;
  if (retryIn !== null) tell($("status"), () => t("retryPending", { seconds: retryIn }));
  else if (last) tell($("status"), () => statusText(last));
}

export async function pollHealth() {
  try {
    const h = await (await fetch("/health")).json();
    if (h.model_family) {
      $("model").textContent = h.model_family.name;
      tell($("license"), () => t("license", { license: h.model_family.license }));
    }
    showInstructions(h.model_family);
    showQuality(h.quality);
    last = h;
  } catch (err) {
    last = "unreachable";
  }
  showStatus(retryIn);
}
