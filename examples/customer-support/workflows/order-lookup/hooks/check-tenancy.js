/**
 * Check tenancy
 *
 * Inputs: the first user message and the order database. Binds the requester's email to the
 * customers it owns, then vetoes when the message names another customer (case-insensitive
 * substring) or an ORD-<n> id owned by another customer; ok otherwise.
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
  const text = (messages.find((m) => m.role === "user") || {}).text || "";
  const found = /[\w.+-]+@[\w-]+(\.[\w-]+)+/.exec(text);
  const email = found ? found[0].toLowerCase() : "";
  const own = new Set(orders.filter((o) => o.email.toLowerCase() === email).map((o) => o.customer));
  const lower = text.toLowerCase();
  const other = [...new Set(orders.map((o) => o.customer))].find(
    (customer) => !own.has(customer) && lower.includes(customer.toLowerCase()),
  );
  const foreign = (text.match(/ORD-\d+/g) || []).find((id) => {
    const order = orders.find((o) => o.id === id);
    return order && !own.has(order.customer);
  });
  const detail = other || (foreign && `order ${foreign}`);
  if (detail) {
    return veto(
      `${email || "This requester"} is not authorized to access orders for ${detail}. ` +
        "You may only view orders for your own account.",
    );
  }
  return ok();
});
