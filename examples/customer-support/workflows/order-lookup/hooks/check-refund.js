/**
 * Check refund
 *
 * Inputs: scratchpad/refund.json ({ orderId, decision, reason }) and the order database.
 * Vetoes when the file is missing or not JSON, when decision is not exactly "approved" or
 * "denied", or when it contradicts the refund policy (approved only for an existing order
 * that is delivered or delayed); ok when the decision is the one the policy requires.
 */
import { ok, veto, defineHook } from "@archmax-ai/harness/sandbox";

export default defineHook(async ({ tools }) => {
  let refund;
  try {
    refund = JSON.parse(await tools.readFile({ file_path: "scratchpad/refund.json" }));
  } catch (error) {
    return veto(
      "scratchpad/refund.json is missing or not JSON: write it as " +
        '{"orderId": "...", "decision": "approved|denied", "reason": "..."} before advancing.',
    );
  }
  if (refund.decision !== "approved" && refund.decision !== "denied") {
    return veto(`decision must be exactly "approved" or "denied", not ${JSON.stringify(refund.decision)}.`);
  }
  const orders = JSON.parse(await tools.readFile({ file_path: "skills/order-data/assets/orders.json" }));
  const order = orders.find((o) => o.id === refund.orderId);
  const required = order && (order.status === "delivered" || order.status === "delayed") ? "approved" : "denied";
  if (refund.decision !== required) {
    return veto(`The refund policy requires the decision "${required}" for ${refund.orderId}.`);
  }
  return ok();
});
