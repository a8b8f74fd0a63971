/**
 * Check requester
 *
 * Inputs: the first user message and the order database. Takes the first email address in
 * the first user message and matches it, case-insensitively, against the orders' emails.
 * Vetoes when the orders cannot be read, when the message names no email address, or when
 * the address is not in the order database; ok otherwise.
 */
import { ok, veto, defineHook } from "@archmax-ai/harness/sandbox";

const ORDERS = "skills/order-data/assets/orders.json";

export default defineHook(async ({ messages, tools }) => {
  let orders;
  try {
    orders = JSON.parse(await tools.readFile({ file_path: ORDERS }));
  } catch (error) {
    return veto(`The order database could not be read (${error}); the request is rejected.`);
  }
  const first = messages.find((m) => m.role === "user");
  const found = first && /[\w.+-]+@[\w-]+(\.[\w-]+)+/.exec(first.text || "");
  if (!found) {
    return veto("Please write from, or name, the email address your orders are registered under.");
  }
  const email = found[0].toLowerCase();
  const customers = [...new Set(orders.filter((o) => o.email.toLowerCase() === email).map((o) => o.customer))];
  if (customers.length === 0) {
    return veto(`The email address "${email}" is not in the order database; the request is rejected.`);
  }
  console.log(`requester ${email} may see orders of ${customers.join(", ")}`);
  return ok();
});
