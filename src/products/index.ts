// What other resources may use of products/ (docs/architecture.md, "Between resources"):
// stock is reserved, released and consumed by orders, in the order's own transaction.
export { findStock, moveStock, type StockLine } from './stock.repository.js';
