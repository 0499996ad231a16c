// The server's state from /health, polled: the status line, the model and its license, the options it offers.
import { showInstructions, showQuality } from "./options.js";
import { $ } from "./state.js";

export async function pollHealth() {
  try {
    const h = await (await fetch("/health")).json();
    const gpu = h.gpu_memory_total_gb ? `on the GPU (${h.gpu_memory_used_gb} of ${h.gpu_memory_total_gb} GB)`
      : "on the CPU";
    if (h.model_family) {
      $("model").textContent = h.model_family.name;
      $("license").textContent = `License: ${h.model_family.license}`;
    }
    showInstructions(h.model_family);
    showQuality(h.quality);
    const waiting = h.queue_depth ? `, ${h.queue_depth} sentences waiting` : "";
    const words = {
      healthy: `Ready: translating ${gpu}, profile ${h.profile}${waiting}`,
      degraded: `Busy: translations may be slow${waiting} (profile ${h.profile})`,
      loading: `Starting: ${h.phase || "loading the model"}… translations can be typed meanwhile`,
      draining: "Shutting down: new translations are refused",
      unhealthy: `Not working: ${h.error || "the server cannot translate right now"}`,
    };
    $("status").textContent = words[h.status] || h.status;
  } catch (err) {
    $("status").textContent = "The server cannot be reached: check that it is running";
  }
}
